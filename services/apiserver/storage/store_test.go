package storage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/services/embedded/embeddedtest"
)

func TestKey(t *testing.T) {
	tests := []struct {
		group, resource, ns, name, want string
	}{
		{"", "pods", "default", "p", "/registry/core/pods/default/p"},
		{"apps", "deployments", "ns", "d", "/registry/apps/deployments/ns/d"},
		{"", "nodes", "", "n1", "/registry/core/nodes/n1"},
		{"", "pods", "default", "", "/registry/core/pods/default/"},
		{"coordination.k8s.io", "leases", "", "", "/registry/coordination.k8s.io/leases/"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := Key(tt.group, tt.resource, tt.ns, tt.name); got != tt.want {
				t.Errorf("Key = %q, want %q", got, tt.want)
			}
			if tt.name == "" {
				return
			}
			g, r, ns, n, ok := events.ParseRegistryKey(tt.want)
			if wantG := map[string]string{"": "", "apps": "apps", "coordination.k8s.io": "coordination.k8s.io"}[tt.group]; !ok || g != wantG || r != tt.resource || ns != tt.ns || n != tt.name {
				t.Errorf("the publisher parses %q as %q %q %q %q %v", tt.want, g, r, ns, n, ok)
			}
		})
	}
}

// metaAt reads the write metadata committed at rev.
func metaAt(t *testing.T, cli *clientv3.Client, rev events.Revision) events.WriteMeta {
	t.Helper()
	resp, err := cli.Get(context.Background(), events.MetaKey, clientv3.WithRev(int64(rev)))
	if err != nil || len(resp.Kvs) == 0 {
		t.Fatalf("no write meta at %d: %v", rev, err)
	}
	if resp.Kvs[0].ModRevision != int64(rev) {
		t.Fatalf("write meta at %d was written at %d: not in the same transaction", rev, resp.Kvs[0].ModRevision)
	}
	var m events.WriteMeta
	if err := json.Unmarshal(resp.Kvs[0].Value, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestStoreWrites(t *testing.T) {
	e := embeddedtest.StartEtcd(t)
	s := New(e.Client)
	ctx := context.Background()
	key := Key("", "configmaps", "default", "a")
	meta := func(id string) *events.WriteMeta { return &events.WriteMeta{ID: id, Verb: "test"} }

	rev1, err := s.Create(ctx, key, []byte(`{"v":1}`), meta("c1"))
	if err != nil {
		t.Fatal(err)
	}
	if m := metaAt(t, e.Client, rev1); m.ID != "c1" || m.Key != key {
		t.Errorf("create meta = %+v", m)
	}
	if _, err := s.Create(ctx, key, []byte(`{"v":9}`), meta("c2")); !errors.Is(err, ErrExists) {
		t.Errorf("second create: %v, want ErrExists", err)
	}
	kv, err := s.Get(ctx, key)
	if err != nil || kv.Revision != rev1 || kv.CreateRevision != rev1 || string(kv.Value) != `{"v":1}` {
		t.Fatalf("get after create: %+v %v", kv, err)
	}

	rev2, _, err := s.Update(ctx, key, []byte(`{"v":2}`), rev1, meta("u1"))
	if err != nil || rev2 <= rev1 {
		t.Fatalf("update: %v %v", rev2, err)
	}
	if m := metaAt(t, e.Client, rev2); m.ID != "u1" {
		t.Errorf("update meta = %+v", m)
	}
	_, cur, err := s.Update(ctx, key, []byte(`{"v":3}`), rev1, meta("u2"))
	if !errors.Is(err, ErrConflict) || cur.Revision != rev2 || string(cur.Value) != `{"v":2}` {
		t.Errorf("stale update: %v, current %+v; want ErrConflict with the current value", err, cur)
	}
	if _, _, err := s.Update(ctx, Key("", "configmaps", "default", "missing"), []byte(`{}`), 5, meta("u3")); !errors.Is(err, ErrNotFound) {
		t.Errorf("update of a missing key: %v, want ErrNotFound", err)
	}
	if _, _, err := s.Delete(ctx, key, rev1, meta("d0")); !errors.Is(err, ErrConflict) {
		t.Errorf("stale delete: %v, want ErrConflict", err)
	}
	rev3, _, err := s.Delete(ctx, key, rev2, meta("d1"))
	if err != nil {
		t.Fatal(err)
	}
	if m := metaAt(t, e.Client, rev3); m.ID != "d1" || m.Key != key {
		t.Errorf("delete meta = %+v", m)
	}
	if _, err := s.Get(ctx, key); !errors.Is(err, ErrNotFound) {
		t.Errorf("get after delete: %v, want ErrNotFound", err)
	}
}

func TestStoreListPages(t *testing.T) {
	e := embeddedtest.StartEtcd(t)
	s := New(e.Client)
	ctx := context.Background()
	prefix := Key("", "configmaps", "default", "")
	for i := 0; i < 25; i++ {
		if _, err := s.Create(ctx, prefix+fmt.Sprintf("cm-%02d", i), []byte(`{}`), &events.WriteMeta{ID: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	// Another collection under a longer prefix must not leak in.
	if _, err := s.Create(ctx, Key("", "configmaps", "default2", "x"), []byte(`{}`), &events.WriteMeta{}); err != nil {
		t.Fatal(err)
	}
	var got []string
	opts := ListOptions{Limit: 10}
	pages := 0
	for {
		res, err := s.List(ctx, prefix, opts)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, kv := range res.Items {
			got = append(got, kv.Key)
		}
		if res.NextKey == "" {
			break
		}
		if want := int64(25 - len(got)); res.Remaining != want {
			t.Errorf("page %d: remaining %d, want %d", pages, res.Remaining, want)
		}
		// Pages after the first read at the first page's revision.
		opts = ListOptions{Limit: 10, StartKey: res.NextKey, Revision: res.Revision}
		if _, err := s.Create(ctx, prefix+fmt.Sprintf("late-%d", pages), []byte(`{}`), &events.WriteMeta{}); err != nil {
			t.Fatal(err)
		}
	}
	if pages != 3 || len(got) != 25 || got[0] != prefix+"cm-00" || got[24] != prefix+"cm-24" {
		t.Errorf("%d pages, %d keys (%v ... %v); want 3 pages of the 25 keys in order", pages, len(got), got[0], got[len(got)-1])
	}
}
