package consumer

import (
	"slices"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
)

// TestCachePartitions: a cache restricted to some partitions holds the
// objects of their controllers and the objects without one; it sees an
// object leave (and forgets it) or arrive when its controller changes;
// gaining a partition takes a snapshot, losing one does not and calls no
// handler.
func TestCachePartitions(t *testing.T) {
	env := controlplanetest.Start(t)
	mkNamespace(t, env, "a")
	// Two controllers in different partitions.
	ctlA, ctlB := "ctl-0", ""
	for i := 1; ctlB == ""; i++ {
		if n := "ctl-" + strconv.Itoa(i); events.Partition("a", n) != events.Partition("a", ctlA) {
			ctlB = n
		}
	}
	pA, _ := strconv.Atoi(events.Partition("a", ctlA))
	pB, _ := strconv.Atoi(events.Partition("a", ctlB))
	owned := func(name, ctl string) *corev1.ConfigMap {
		c := cm("a", name, nil)
		c.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: ctl, UID: types.UID("uid-" + ctl), Controller: ptr.To(true)}}
		return c
	}
	mustCreate(t, env, owned("x1", ctlA))
	x2 := mustCreate(t, env, owned("x2", ctlB))
	x3 := mustCreate(t, env, cm("a", "x3", nil))

	c := newCMCache(t, env, "a")
	c.SetPartitions([]int{pA})
	var rec recorder
	c.AddHandler(rec.handler())
	run(t, c)
	ctx := testCtx(t, 20*time.Second)
	// waitLog waits until the cache has applied the last write.
	waitLog := func() {
		t.Helper()
		r, err := env.Etcd.Get(ctx, events.MetaKey)
		if err != nil {
			t.Fatal(err)
		}
		if err := events.WaitPublished(ctx, env.JS, events.Revision(r.Header.Revision)); err != nil {
			t.Fatal(err)
		}
		if err := c.WaitForLog(ctx); err != nil {
			t.Fatal(err)
		}
	}
	waitLog()
	got, _ := rec.take()
	wantLines(t, got, []string{"ADD a/x1", "ADD a/x3"})
	if !c.Partial() {
		t.Error("Partial() = false")
	}
	has := func(want ...string) {
		t.Helper()
		var names []string
		for _, o := range c.List(nil) {
			names = append(names, o.Name)
		}
		if !slices.Equal(names, want) {
			t.Errorf("cache holds %v, want %v", names, want)
		}
	}

	// Writes to the other partition do not reach the cache.
	mustCreate(t, env, owned("x4", ctlB))
	x2.Data = map[string]string{"v": "1"}
	x2 = mustUpdate(t, env, x2)
	mustCreate(t, env, owned("x5", ctlA))
	// x3 is adopted into the other partition: the handlers see the
	// change, then the cache forgets it.
	x3.OwnerReferences = owned("", ctlB).OwnerReferences
	mustUpdate(t, env, x3)
	// x2 moves in.
	x2.OwnerReferences = owned("", ctlA).OwnerReferences
	mustUpdate(t, env, x2)
	waitLog()
	got, _ = rec.take()
	wantLines(t, got, []string{"ADD a/x5 ev", "UPDATE a/x3 ev", "ADD a/x2 ev"})
	has("x1", "x2", "x5")

	// Gaining a partition: a new snapshot brings its objects.
	c.SetPartitions([]int{pA, pB})
	waitLog()
	got, _ = rec.take()
	wantLines(t, got, []string{"ADD a/x3", "ADD a/x4"})
	has("x1", "x2", "x3", "x4", "x5")
	if n := c.Stats().Lists; n != 2 {
		t.Errorf("%d snapshots, want 2", n)
	}

	// Losing one: its objects go quietly, with no snapshot.
	c.SetPartitions([]int{pB})
	waitLog()
	if got, _ = rec.take(); len(got) > 0 {
		t.Errorf("handler calls on losing a partition: %v", got)
	}
	has("x3", "x4")
	mustDelete(t, env, "a", "x1")
	mustCreate(t, env, cm("a", "x6", nil))
	waitLog()
	got, _ = rec.take()
	wantLines(t, got, []string{"ADD a/x6 ev"})

	c.SetPartitions(nil)
	waitLog()
	has("x2", "x3", "x4", "x5", "x6")
	if c.Partial() || c.Stats().Lists != 3 {
		t.Errorf("following everything: Partial %v, %d snapshots", c.Partial(), c.Stats().Lists)
	}
}
