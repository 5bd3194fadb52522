package daemonset

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/events/consumer"
	"github.com/cairn-dev/cairn/events/consumer/consumertest"
	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
)

// TestScaleOut: two sharded controller managers split the DaemonSets;
// on the log, every daemon pod is created once (no replica acts on
// another's DaemonSet); when one manager stops, the other takes its
// DaemonSets over and gives a new node their pods.
func TestScaleOut(t *testing.T) {
	const ns, sets = "scale", 8
	env := controlplanetest.Start(t)
	if _, err := env.Client.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"n1", "n2"} {
		createNode(t, env, n)
	}
	from := controlplanetest.WaitForLog(t, env)
	stop1 := runSharded(t, env, "one")
	runSharded(t, env, "two")
	var names []string
	for i := range sets {
		ds := createDS(t, env, newDS(ns, fmt.Sprintf("ds%d", i)))
		names = append(names, ds.Name)
		waitNodes(t, env, ds, "n1", "n2")
	}
	stop1()
	createNode(t, env, "n3")
	for _, name := range names {
		waitNodes(t, env, getDS(t, env, ns, name), "n1", "n2", "n3")
	}

	controlplanetest.WaitForLog(t, env)
	created := map[string]int{} // per DaemonSet
	err := events.Tail(context.Background(), env.JS, events.TailOptions{Resource: "pods", Namespace: ns, FromRevision: events.Revision(from)},
		func(ev *events.Event) error {
			if ev.Type != events.Added {
				return nil
			}
			var pod corev1.Pod
			if err := json.Unmarshal(ev.Object, &pod); err != nil {
				return err
			}
			if ref := metav1.GetControllerOf(&pod); ref != nil {
				created[ref.Name]++
			}
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		if created[name] != 3 {
			t.Errorf("%s: %d pods created on the log, want 3 (one per node)", name, created[name])
		}
	}
}

// runSharded runs a sharded manager with the DaemonSet controller and
// returns a stop that ends it and waits for it (also at cleanup).
func runSharded(t *testing.T, env *controlplanetest.Env, id string) (stop func()) {
	t.Helper()
	m := consumertest.Manager(t, env, controlplanetest.ControllerToken, controlplanetest.Logger("DS_TEST_LOG"), func(o *consumer.ManagerOptions) {
		o.Shard = &consumer.ShardOptions{Group: "daemonset-test", Identity: id, Partitions: 4, LeaseTTL: 2 * time.Second, Marker: "daemonset-test-"}
	})
	if _, err := New(m, Options{}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	sctx, scancel := context.WithTimeout(ctx, wait)
	defer scancel()
	if err := m.WaitForSync(sctx); err != nil {
		cancel()
		<-done
		t.Fatal(err)
	}
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager %s: %v", id, err)
		}
	}
	t.Cleanup(stop)
	return stop
}

// TestCausation follows the log: the revision and the pods a new
// DaemonSet gets carry its create's event id as causation and correlation,
// and pods made for a node added later are caused by that node's event.
func TestCausation(t *testing.T) {
	const ns = "cause"
	env, m := startManager(t, ns)
	createNode(t, env, "n1")
	from := events.Revision(controlplanetest.WaitForLog(t, env))
	ds := createDS(t, env, newDS(ns, "web"))
	waitNodes(t, env, ds, "n1")
	waitStatus(t, env, ds, "settled", func(s appsv1.DaemonSetStatus) bool {
		return s.DesiredNumberScheduled == 1 && s.CurrentNumberScheduled == 1
	})
	// Once the controller has seen its own writes, the node's event is
	// the last one to queue the DaemonSet (a queued key keeps the cause
	// that queued it last).
	controlplanetest.WaitForLog(t, env)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := m.WaitForLog(ctx); err != nil {
		t.Fatal(err)
	}
	node := createNode(t, env, "n2")
	waitNodes(t, env, ds, "n1", "n2")

	controlplanetest.WaitForLog(t, env)
	byID := map[string]*events.Event{}
	var dsCreated, nodeCreated *events.Event
	var created []*events.Event
	for _, r := range []events.TailOptions{
		{Group: "apps", Resource: "daemonsets", Namespace: ns, FromRevision: from},
		{Resource: "nodes", FromRevision: from},
		{Group: "apps", Resource: "controllerrevisions", Namespace: ns, FromRevision: from},
		{Resource: "pods", Namespace: ns, FromRevision: from},
	} {
		err := events.Tail(context.Background(), env.JS, r, func(ev *events.Event) error {
			byID[ev.ID] = ev
			switch {
			case ev.Type != events.Added:
			case ev.Resource == "daemonsets":
				dsCreated = ev
			case ev.Resource == "nodes" && ev.Name == node.Name:
				nodeCreated = ev
			case ev.Resource == "pods", ev.Resource == "controllerrevisions":
				created = append(created, ev)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if dsCreated == nil || nodeCreated == nil || len(created) != 3 {
		t.Fatalf("on the log: daemonset %v, node %v, %d pods and revisions created (want 3)", dsCreated != nil, nodeCreated != nil, len(created))
	}
	for _, ev := range created {
		want := dsCreated
		if ev.Resource == "pods" {
			var pod corev1.Pod
			if err := json.Unmarshal(ev.Object, &pod); err != nil {
				t.Fatal(err)
			}
			if n, _ := targetNode(&pod); n == node.Name {
				want = nodeCreated
			}
		}
		if ev.CausationID != want.ID || ev.CorrelationID != want.ID {
			cause := "unknown"
			if c := byID[ev.CausationID]; c != nil {
				cause = string(c.Type) + " " + c.Resource + "/" + c.Name + " by " + c.Verb
			}
			t.Errorf("%s %s created with causation %q (%s) correlation %q, want %q (the %s's create)",
				ev.Resource, ev.Name, ev.CausationID, cause, ev.CorrelationID, want.ID, want.Resource)
		}
	}
}
