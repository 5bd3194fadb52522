package replay_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/events/publish"
	"github.com/cairn-dev/cairn/projections/history/historytest"
	"github.com/cairn-dev/cairn/projections/history/replay"
	"github.com/cairn-dev/cairn/services/embedded"
)

// testLog is a synthetic log with what replay must handle besides one
// object per revision: revisions with no event (pads), a transaction that
// changed three objects, deletes, and a lease renewed twice, of which
// CAIRN_LEASES keeps only the last renewal; the revision of the first is
// the last one before the second without an event, a dozen revisions
// back.
func testLog() []*events.Event {
	g := historytest.NewGen()
	lease := func() *events.Event {
		return g.Event(events.Modified, "coordination.k8s.io", "leases", "Lease", "kube-system", "kube-scheduler",
			"uid-lease", "system:kube-scheduler", "", "", map[string]any{"spec": map[string]any{"holderIdentity": "s-1"}})
	}
	var evs []*events.Event
	evs = append(evs, g.PodLife("default", 0)...)
	g.Skip(3)
	evs = append(evs, lease())
	evs = append(evs, g.Txn(func() []*events.Event {
		var out []*events.Event
		for _, n := range []string{"a", "b", "c"} {
			out = append(out, g.Event(events.Added, "", "configmaps", "ConfigMap", "default", n, "uid-"+n, "alice", "", "", nil))
		}
		return out
	})...)
	evs = append(evs, g.Rollout("default", "web", "alice", 3)...)
	evs = append(evs, lease())
	g.Skip(1)
	evs = append(evs, g.PodLife("default", 1)...)
	evs = append(evs, g.Event(events.Deleted, "", "configmaps", "ConfigMap", "default", "b", "uid-b", "bob", "", "", nil))
	return evs
}

// kept drops the lease events CAIRN_LEASES does not keep (all but the
// last of each lease).
func kept(evs []*events.Event) []*events.Event {
	last := map[string]events.Revision{}
	for _, e := range evs {
		if events.IsLease(e.Group, e.Resource) {
			last[e.Name] = e.Revision
		}
	}
	return slices.DeleteFunc(slices.Clone(evs), func(e *events.Event) bool {
		return events.IsLease(e.Group, e.Resource) && e.Revision != last[e.Name]
	})
}

// TestReplay replays the test log whole and up to revisions and times,
// then serves each result the way `cairn up` does and checks that every
// revision up to the target is where the log has it: each object's value
// and mod revision, the write metadata of each logged revision, a pad for
// every other, the head, and a copy of the log that publish.Verify accepts.
func TestReplay(t *testing.T) {
	evs := testLog()
	js := historytest.StartLog(t)
	if err := historytest.Publish(t.Context(), js, evs); err != nil {
		t.Fatal(err)
	}
	logged := kept(evs)
	last := logged[len(logged)-1].Revision
	txnRev := evs[5].Revision // the three-object transaction
	cases := []struct {
		name     string
		toRev    events.Revision
		toTime   time.Time
		fsync    bool
		wantHead events.Revision
	}{
		{name: "whole log", wantHead: last},
		{name: "to a transaction of three objects, with fsync", toRev: txnRev, fsync: true, wantHead: txnRev},
		{name: "to a revision without event", toRev: evs[4].Revision - 1, wantHead: evs[3].Revision},
		{name: "to a time", toTime: evs[20].Time, wantHead: evs[20].Revision},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			rep, err := replay.Run(t.Context(), replay.Config{JS: js, DataDir: dir, ToRev: tc.toRev, ToTime: tc.toTime, Fsync: tc.fsync})
			if err != nil {
				t.Fatal(err)
			}
			var want []*events.Event
			for _, e := range logged {
				if e.Revision <= tc.wantHead {
					want = append(want, e)
				}
			}
			if rep.Head != tc.wantHead || rep.Events != len(want) {
				t.Fatalf("report %+v, want head %d and %d events", rep, tc.wantHead, len(want))
			}
			if rep.Revisions+rep.Pads != int(tc.wantHead)-1 {
				t.Errorf("report %+v: %d revisions and %d pads, want %d in all", rep, rep.Revisions, rep.Pads, tc.wantHead-1)
			}
			cli := startEtcd(t, filepath.Join(dir, "etcd"))
			checkEtcd(t, cli, want, tc.wantHead)
			checkLog(t, cli, filepath.Join(dir, "nats"), rep)
			if _, err := replay.Run(t.Context(), replay.Config{JS: js, DataDir: dir}); !errors.Is(err, replay.ErrNotEmpty) {
				t.Errorf("second replay into %s: %v, want ErrNotEmpty", dir, err)
			}
		})
	}
}

func startEtcd(t *testing.T, dir string) *clientv3.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	e, err := embedded.StartEtcd(ctx, embedded.EtcdConfig{Dir: dir, NoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{e.Endpoint()}, Logger: zap.NewNop()})
	if err != nil {
		e.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cli.Close()
		e.Close()
	})
	return cli
}

// checkEtcd checks every revision of the replayed etcd up to head.
func checkEtcd(t *testing.T, cli *clientv3.Client, want []*events.Event, head events.Revision) {
	ctx := t.Context()
	resp, err := cli.Get(ctx, replay.PadKey)
	if err != nil {
		t.Fatal(err)
	}
	if events.Revision(resp.Header.Revision) != head {
		t.Errorf("head revision %d, want %d", resp.Header.Revision, head)
	}
	logged := map[events.Revision]*events.Event{}
	for _, e := range want {
		if _, ok := logged[e.Revision]; !ok {
			logged[e.Revision] = e
		}
		key := events.RegistryKey(e.Group, e.Resource, e.Namespace, e.Name)
		r, err := cli.Get(ctx, key, clientv3.WithRev(int64(e.Revision)))
		if err != nil {
			t.Fatal(err)
		}
		if e.Type == events.Deleted {
			if len(r.Kvs) != 0 {
				t.Errorf("%s at %d: present after its delete", key, e.Revision)
			}
			continue
		}
		val, err := replay.StripResourceVersion(e.Object, e.Revision)
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Kvs) != 1 || r.Kvs[0].ModRevision != int64(e.Revision) || string(r.Kvs[0].Value) != string(val) {
			t.Errorf("%s at %d: got %v, want %s at mod revision %d", key, e.Revision, r.Kvs, val, e.Revision)
		}
	}
	// Every revision is one logged write (with its metadata) or one pad.
	for rev := int64(2); rev <= int64(head); rev++ {
		meta, pad := modRev(t, cli, events.MetaKey, rev), modRev(t, cli, replay.PadKey, rev)
		e, ok := logged[events.Revision(rev)]
		switch {
		case ok && meta != rev:
			t.Errorf("revision %d: %s last written at %d", rev, events.MetaKey, meta)
		case ok:
			r, err := cli.Get(ctx, events.MetaKey, clientv3.WithRev(rev))
			if err != nil {
				t.Fatal(err)
			}
			var wm events.WriteMeta
			if err := json.Unmarshal(r.Kvs[0].Value, &wm); err != nil || wm.ID != e.ID || wm.Actor.User != e.Actor.User {
				t.Errorf("revision %d: metadata %s (%v), want event %s by %v", rev, r.Kvs[0].Value, err, e.ID, e.Actor)
			}
		case pad != rev:
			t.Errorf("revision %d: no logged event and no pad (pad at %d, metadata at %d)", rev, pad, meta)
		}
	}
}

func modRev(t *testing.T, cli *clientv3.Client, key string, rev int64) int64 {
	t.Helper()
	r, err := cli.Get(t.Context(), key, clientv3.WithRev(rev))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Kvs) == 0 {
		return 0
	}
	return r.Kvs[0].ModRevision
}

// checkLog serves the replayed log and verifies it against the replayed
// etcd, as `cairn events verify` does.
func checkLog(t *testing.T, cli *clientv3.Client, natsDir string, rep *replay.Report) {
	n, err := embedded.StartNATS(embedded.NATSConfig{StoreDir: natsDir, Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	nc, err := n.Connect()
	var r *publish.Report
	if err == nil {
		defer nc.Close()
		var js jetstream.JetStream
		if js, err = jetstream.New(nc); err == nil {
			r, err = publish.Verify(t.Context(), cli, js)
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	if !r.OK() || r.Events+r.LeaseEvents != rep.Events {
		var b strings.Builder
		_ = r.Write(&b)
		t.Errorf("verify: %d + %d events, want %d:\n%s", r.Events, r.LeaseEvents, rep.Events, b.String())
	}
}
