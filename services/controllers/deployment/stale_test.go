package deployment

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/events/consumer"
)

// TestStaleReplicaSetCache holds the controller's replica set cache just
// after it applied the old replica set's status going from 2 pods to 1
// (replicas 2, maxSurge 1: the old one scaled down to 1 with the new one
// at 1), while the deployment cache goes on, and rolls out a third
// template meanwhile. The controller then scales the second replica set
// to 2; a round that trusted the held cache (the second still at 1)
// would create the third at 1, counting 1 + 1: 4 replicas in the specs,
// past replicas + maxSurge, as the chaos test saw after a takeover. The
// controller must wait for its own writes instead. The specs' sum is
// watched through the apiserver, at every change.
func TestStaleReplicaSetCache(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	w := startWorld(t)
	ns := w.namespace(t, "stale")
	d := newDeployment(ns, "web", 2, "nginx:1")
	d.Spec.Strategy = rollingStrategy("1", "0")
	w.create(t, d)
	w.complete(t, ns, "web")
	first := w.replicaSets(t, ns)[0].Name

	// Hold the cache's dispatch in the handler of first's scale-down: the
	// object is stored, the cache's revision and every later replica set
	// change wait.
	held, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	var holding atomic.Bool
	w.ctrl.rss.AddHandler(consumer.Handler[*appsv1.ReplicaSet]{OnUpdate: func(old, rs *appsv1.ReplicaSet, _ *events.Event) {
		if rs.Namespace != ns || rs.Name != first || *rs.Spec.Replicas != 1 || old.Status.Replicas != 2 || rs.Status.Replicas != 1 ||
			!holding.CompareAndSwap(false, true) {
			return
		}
		close(held)
		<-release
	}})

	most, stopWatch := watchSpecSum(t, w, ns)
	w.update(t, ns, "web", func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = "nginx:2" })
	select {
	case <-held:
	case <-time.After(wait):
		t.Fatal("the old replica set's status never went from 2 pods to 1")
	}
	eventually(t, wait, "the second replica set to be scaled to 2", func() bool {
		rss := w.replicaSets(t, ns)
		return len(rss) == 2 && *rss[1].Spec.Replicas == 2
	})
	w.update(t, ns, "web", func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = "nginx:3" })
	time.Sleep(2 * time.Second) // and creates the third at 1 here
	once.Do(func() { close(release) })
	d = w.complete(t, ns, "web")
	if n := stopWatch(); n > 3 {
		t.Errorf("the replica sets' specs reached %d replicas in all, more than replicas 2 + maxSurge 1", n)
	}
	if got := *most; got < 2 {
		t.Errorf("watched at most %d replicas in the specs; the watch saw nothing", got)
	}
	rss := w.replicaSets(t, ns)
	if last := rss[len(rss)-1]; *last.Spec.Replicas != 2 || last.Spec.Template.Spec.Containers[0].Image != "nginx:3" {
		t.Errorf("after the rollouts: %s, replica sets %v", describe(d), summary(rss))
	}
}

// watchSpecSum watches the namespace's replica sets through the apiserver
// and keeps the largest sum of spec.replicas after any change; stop ends
// the watch and returns it.
func watchSpecSum(t *testing.T, w *world, ns string) (*int32, func() int32) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	l, err := w.client.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wi, err := w.client.AppsV1().ReplicaSets(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: l.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	specs := map[string]int32{}
	var most int32
	sum := func() {
		var n int32
		for _, s := range specs {
			n += s
		}
		most = max(most, n)
	}
	for _, rs := range l.Items {
		specs[rs.Name] = *rs.Spec.Replicas
	}
	sum()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range wi.ResultChan() {
			rs, ok := ev.Object.(*appsv1.ReplicaSet)
			if !ok {
				continue
			}
			if ev.Type == watch.Deleted {
				delete(specs, rs.Name)
			} else {
				specs[rs.Name] = *rs.Spec.Replicas
			}
			sum()
		}
	}()
	stopped := false
	stop := func() int32 {
		if !stopped {
			stopped = true
			wi.Stop()
			cancel()
			<-done
		}
		return most
	}
	t.Cleanup(func() { stop() })
	return &most, stop
}
