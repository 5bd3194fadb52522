package consumer

import (
	"slices"
	"strconv"
	"strings"
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

// TestCacheGapEvents: a cache that gains partitions lists again; the
// changes that snapshot finds in the objects it already followed (made
// while its tail was stopped) reach the handlers with their events from
// the log, a delete included, so that work they cause keeps its cause;
// the objects of the new partition come with none.
func TestCacheGapEvents(t *testing.T) {
	env := controlplanetest.Start(t)
	mkNamespace(t, env, "g")
	ctlA, ctlB := "ctl-0", ""
	for i := 1; ctlB == ""; i++ {
		if n := "ctl-" + strconv.Itoa(i); events.Partition("g", n) != events.Partition("g", ctlA) {
			ctlB = n
		}
	}
	pA, _ := strconv.Atoi(events.Partition("g", ctlA))
	pB, _ := strconv.Atoi(events.Partition("g", ctlB))
	owned := func(name, ctl string) *corev1.ConfigMap {
		c := cm("g", name, nil)
		c.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: ctl, UID: types.UID("uid-" + ctl), Controller: ptr.To(true)}}
		return c
	}
	y1 := mustCreate(t, env, owned("y1", ctlA))
	mustCreate(t, env, owned("y2", ctlA))
	c := newCMCache(t, env, "g")
	c.SetPartitions([]int{pA})
	var rec recorder
	c.AddHandler(rec.handler())
	ctx := testCtx(t, 20*time.Second)
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
	stop := run(t, c)
	waitLog()
	got, _ := rec.take()
	wantLines(t, got, []string{"ADD g/y1", "ADD g/y2"})

	// The tail stops; meanwhile y1 changes, y2 goes, y4 comes in the
	// followed partition and y5 in the other.
	stop()
	y1.Data = map[string]string{"v": "1"}
	mustUpdate(t, env, y1)
	mustDelete(t, env, "g", "y2")
	mustCreate(t, env, owned("y4", ctlA))
	mustCreate(t, env, owned("y5", ctlB))
	c.SetPartitions([]int{pA, pB})
	run(t, c)
	waitLog()
	got, evs := rec.take()
	if len(got) != 4 {
		t.Fatalf("handler calls %v, want 4", got)
	}
	wantLines(t, got[:3], []string{"UPDATE g/y1 ev", "ADD g/y4 ev", "ADD g/y5"})
	if !strings.HasPrefix(got[3], "DELETE g/y2 ev") || evs[3].Type != events.Deleted {
		t.Errorf("y2's delete came as %q (event %+v), want its DELETED event", got[3], evs[3])
	}
	for i, ev := range evs[:2] {
		if ev.ID == "" || ev.Object != nil {
			t.Errorf("%s: event id %q, object %d bytes: want the log's id and no object", got[i], ev.ID, len(ev.Object))
		}
	}
}
