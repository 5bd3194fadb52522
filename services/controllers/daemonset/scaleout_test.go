package daemonset

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

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
