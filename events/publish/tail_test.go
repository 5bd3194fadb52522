package publish_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/events/publish"
)

func TestTail(t *testing.T) {
	e := newEnv(t)
	e.startPublisher(t, publish.PublisherConfig{})
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
