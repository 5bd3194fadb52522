package events_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/events"
)

func TestTail(t *testing.T) {
	e := newEnv(t)
	e.startPublisher(t, events.PublisherConfig{})
	revs := map[string]int64{}
	for _, o := range []struct{ group, resource, apiVersion, kind, ns, name, node string }{
		{"", "pods", "v1", "Pod", "a", "p1", "node-1"},
		{"", "pods", "v1", "Pod", "b", "p2", ""},
		{"apps", "deployments", "apps/v1", "Deployment", "a", "d1", ""},
		{"", "configmaps", "v1", "ConfigMap", "b", "p1", ""},
		{"", "namespaces", "v1", "Namespace", "", "a", ""},
	} {
		key := events.RegistryKey(o.group, o.resource, o.ns, o.name)
		obj := object(o.apiVersion, o.kind, o.ns, o.name, map[string]any{"spec": map[string]any{"nodeName": o.node}})
		revs[o.kind+"/"+o.name] = mustWrite(t, e.cli, key, obj, meta(key, "create", "dave"))
	}
	e.waitPublished(t, revs["Namespace/a"])

	for _, tc := range []struct {
		name string
		opts events.TailOptions
		want []string
	}{
		{"everything", events.TailOptions{}, []string{"Pod/p1", "Pod/p2", "Deployment/d1", "ConfigMap/p1", "Namespace/a"}},
		{"core pods", events.TailOptions{Resource: "pods"}, []string{"Pod/p1", "Pod/p2"}},
		{"a group", events.TailOptions{Group: "apps"}, []string{"Deployment/d1"}},
		{"a namespace", events.TailOptions{Namespace: "b"}, []string{"Pod/p2", "ConfigMap/p1"}},
		{"a name", events.TailOptions{Name: "p1"}, []string{"Pod/p1", "ConfigMap/p1"}},
		{"a node", events.TailOptions{Resource: "pods", Node: "node-1"}, []string{"Pod/p1"}},
		{"a kind", events.TailOptions{Kind: "deployment"}, []string{"Deployment/d1"}},
		{"from a revision", events.TailOptions{FromRevision: events.Revision(revs["Deployment/d1"])}, []string{"Deployment/d1", "ConfigMap/p1", "Namespace/a"}},
		{"from the future", events.TailOptions{FromRevision: 1 << 40}, nil},
		{"nothing matches", events.TailOptions{Resource: "secrets"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tailAll(t, e.js, tc.opts)
			if len(got) != len(tc.want) {
				t.Fatalf("got %d events, want %v", len(got), tc.want)
			}
			for i, g := range got {
				if g.Kind+"/"+g.Name != tc.want[i] || int64(g.Revision) != revs[tc.want[i]] {
					t.Errorf("event %d: %s at %d, want %s at %d", i, g.Kind+"/"+g.Name, g.Revision, tc.want[i], revs[tc.want[i]])
				}
			}
		})
	}

	t.Run("follow", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		got := make(chan *events.Event, 10)
		done := make(chan error, 1)
		go func() {
			done <- events.Tail(ctx, e.js, events.TailOptions{Resource: "configmaps", Follow: true}, func(ev *events.Event) error {
				got <- ev
				return nil
			})
		}()
		if ev := <-got; ev.Name != "p1" {
			t.Fatalf("first event %s", events.FormatLine(ev))
		}
		key := events.RegistryKey("", "configmaps", "b", "later")
		rev := mustWrite(t, e.cli, key, object("v1", "ConfigMap", "b", "later", nil), meta(key, "create", "dave"))
		select {
		case ev := <-got:
			if int64(ev.Revision) != rev || ev.Name != "later" {
				t.Errorf("followed %s, want revision %d", events.FormatLine(ev), rev)
			}
		case <-ctx.Done():
			t.Fatal("new event never arrived")
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Tail with Follow returned %v after cancel", err)
		}
	})

	t.Run("callback error stops", func(t *testing.T) {
		stop := errors.New("stop")
		n := 0
		err := events.Tail(context.Background(), e.js, events.TailOptions{}, func(*events.Event) error {
			n++
			return stop
		})
		if !errors.Is(err, stop) || n != 1 {
			t.Errorf("Tail = %v after %d events, want stop after 1", err, n)
		}
	})
}

func TestFormatLine(t *testing.T) {
	ts := time.Date(2025, 1, 2, 15, 4, 5, 123456789, time.UTC)
	for _, tc := range []struct {
		name string
		ev   events.Event
		want string
	}{
		{"namespaced", events.Event{Time: ts, Revision: 1234, Type: events.Added, Kind: "Pod", Namespace: "default", Name: "web-0", Actor: events.Actor{User: "alice"}},
			"2025-01-02T15:04:05.123Z 1234 ADDED Pod default/web-0 alice"},
		{"cluster-scoped, no actor", events.Event{Time: ts, Revision: 7, Type: events.Deleted, Kind: "Node", Name: "n1"},
			"2025-01-02T15:04:05.123Z 7 DELETED Node n1 -"},
		{"local time is printed in UTC", events.Event{Time: ts.In(time.FixedZone("x", 3600)), Revision: 8, Type: events.Modified, Kind: "Lease", Namespace: "l", Name: "n"},
			"2025-01-02T15:04:05.123Z 8 MODIFIED Lease l/n -"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := events.FormatLine(&tc.ev); got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestRegistryKey(t *testing.T) {
	for _, tc := range []struct {
		key                              string
		group, resource, namespace, name string
		ok                               bool
	}{
		{"/registry/core/pods/default/web-0", "", "pods", "default", "web-0", true},
		{"/registry/apps/deployments/ns/d", "apps", "deployments", "ns", "d", true},
		{"/registry/core/nodes/n1", "", "nodes", "", "n1", true},
		{"/registry/coordination.k8s.io/leases/kube-node-lease/n1", "coordination.k8s.io", "leases", "kube-node-lease", "n1", true},
		{"/registry/core/pods", "", "", "", "", false},
		{"/registry/core/pods/a/b/c", "", "", "", "", false},
		{"/registry/core/pods//b", "", "", "", "", false},
		{"/cairn/txmeta", "", "", "", "", false},
	} {
		t.Run(tc.key, func(t *testing.T) {
			g, r, ns, n, ok := events.ParseRegistryKey(tc.key)
			if ok != tc.ok || g != tc.group || r != tc.resource || ns != tc.namespace || n != tc.name {
				t.Fatalf("ParseRegistryKey = %q %q %q %q %v", g, r, ns, n, ok)
			}
			if ok {
				if back := events.RegistryKey(g, r, ns, n); back != tc.key {
					t.Errorf("RegistryKey = %q", back)
				}
			}
		})
	}
}

func TestEnsureStreamsIsIdempotent(t *testing.T) {
	e := newEnv(t) // created once already
	ctx := context.Background()
	if err := events.EnsureStreams(ctx, e.js, events.StreamConfig{Replicas: 1}); err != nil {
		t.Fatal(err)
	}
	s, err := e.js.Stream(ctx, events.Stream)
	if err != nil {
		t.Fatal(err)
	}
	c := s.CachedInfo().Config
	if c.Subjects[0] != "cairn.ev.>" || !c.DenyDelete || !c.AllowDirect || c.Duplicates != 2*time.Minute ||
		c.MaxMsgSize != 8<<20 || c.MaxAge != 0 || c.MaxMsgsPerSubject > 0 {
		t.Errorf("%s config %+v", events.Stream, c)
	}
	l, err := e.js.Stream(ctx, events.LeaseStream)
	if err != nil {
		t.Fatal(err)
	}
	if lc := l.CachedInfo().Config; lc.Subjects[0] != "cairn.lease.>" || lc.MaxMsgsPerSubject != 1 || !lc.AllowDirect {
		t.Errorf("%s config %+v", events.LeaseStream, lc)
	}
}
