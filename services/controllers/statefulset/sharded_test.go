package statefulset

import (
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/events/consumer"
)

// TestSharded runs two sharded replicas, as two controller-managers: they
// split the sets, and when one stops the other takes its sets over. Every
// set comes up and rolls an update; on the log each pod is created exactly
// twice (once, then once at the new revision: no replica acted on a set
// it did not own, and none repeated another's work), every create has a
// cause, and each set has its two revisions.
func TestSharded(t *testing.T) {
	w := newWorld(t)
	sharded := func(id string) func(*consumer.ManagerOptions) {
		return func(o *consumer.ManagerOptions) {
			o.Shard = &consumer.ShardOptions{Group: "sts-test", Identity: id, Partitions: 4, LeaseTTL: 2 * time.Second, Marker: "sts-test-"}
		}
	}
	stopOne := w.replica(t, sharded("one"))
	w.replica(t, sharded("two"))
	const ns, sets = "sharded", 6
	w.namespace(t, ns)
	for i := range sets {
		w.create(t, newSet(ns, fmt.Sprintf("s%d", i), 2))
	}
	first := map[string]string{}
	for i := range sets {
		name := fmt.Sprintf("s%d", i)
		first[name] = w.waitSet(t, ns, name, "2 ready", settled).Status.UpdateRevision
	}

	stopOne()
	for i := range sets {
		w.update(t, ns, fmt.Sprintf("s%d", i), setImage("busybox:2"))
	}
	for name, rev := range first {
		w.waitSet(t, ns, name, "updated after the takeover", func(s *appsv1.StatefulSet) bool {
			return settled(s) && s.Status.UpdateRevision != rev
		})
	}

	created := map[string]int{}
	for _, ev := range w.podEvents(t, ns) {
		if ev.Type != events.Added {
			continue
		}
		created[ev.Name]++
		if ev.CausationID == "" {
			t.Errorf("pod %s created without a cause", ev.Name)
		}
	}
	for i := range sets {
		for o := range 2 {
			if name := fmt.Sprintf("s%d-%d", i, o); created[name] != 2 {
				t.Errorf("pod %s created %d times, want 2 (all created: %v)", name, created[name], created)
			}
		}
	}
	owned := map[string]int{}
	for _, r := range w.revisions(t, ns) {
		if ref := metav1.GetControllerOf(&r); ref != nil {
			owned[ref.Name]++
		}
	}
	for name := range first {
		if owned[name] != 2 {
			t.Errorf("set %s has %d revisions, want 2 (all: %v)", name, owned[name], owned)
		}
	}
}
