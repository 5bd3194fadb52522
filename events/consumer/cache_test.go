package consumer

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
)

// TestCache covers the snapshot, the tail in log order with the causing
// events, the indexes, late handlers, and duplicates.
func TestCache(t *testing.T) {
	env := controlplanetest.Start(t)
	mkNamespace(t, env, "a")
	mkNamespace(t, env, "b")
	one := mustCreate(t, env, cm("a", "one", map[string]string{"v": "1"}))
	mustCreate(t, env, cm("a", "two", nil))
	owned := cm("a", "owned", nil)
	owned.Labels = map[string]string{"app": "x"}
	owned.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "one", UID: one.UID, Controller: ptr.To(true)}}
	mustCreate(t, env, owned)
	other := mustCreate(t, env, cm("b", "other", nil))

	c := newCMCache(t, env, "a")
	var rec recorder
	c.AddHandler(rec.handler())
	run(t, c)
	if err := c.WaitForSync(testCtx(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	got, _ := rec.take()
	wantLines(t, got, []string{"ADD a/one", "ADD a/owned", "ADD a/two"})
	if c.Stats().Lists != 1 || c.Revision() < rev(t, other) {
		t.Errorf("after sync: stats %+v, revision %d, want 1 list at >= %d", c.Stats(), c.Revision(), rev(t, other))
	}

	one.Data["v"] = "2"
	one = mustUpdate(t, env, one)
	mustCreate(t, env, cm("a", "three", nil))
	mustDelete(t, env, "a", "two")
	other.Data = map[string]string{"x": "y"}
	mustUpdate(t, env, other)
	four := mustCreate(t, env, cm("a", "four", nil))
	eventually(t, 10*time.Second, "the cache to reach the last write", func() bool { return c.Revision() >= rev(t, four) })

	got, evs := rec.take()
	wantLines(t, got, []string{"UPDATE a/one ev", "ADD a/three ev", "DELETE a/two ev", "ADD a/four ev"})
	if len(evs) == 4 {
		if ev := evs[0]; ev.Type != events.Modified || ev.Actor.User != "admin" || ev.ID == "" || ev.CorrelationID != ev.ID || ev.Verb != "update" {
			t.Errorf("update event: %+v", ev)
		}
		if evs[2].Type != events.Deleted {
			t.Errorf("delete event type %s", evs[2].Type)
		}
	}

	t.Run("reads", func(t *testing.T) {
		if o, ok := c.Get("a", "one"); !ok || o.Data["v"] != "2" {
			t.Errorf("Get a/one = %v, %v", o, ok)
		}
		if _, ok := c.Get("a", "two"); ok {
			t.Error("deleted a/two still cached")
		}
		if _, ok := c.Get("b", "other"); ok {
			t.Error("b/other is outside the cache's namespace")
		}
		names := func(objs []*corev1.ConfigMap) (s []string) {
			for _, o := range objs {
				s = append(s, o.Name)
			}
			return s
		}
		for _, tc := range []struct {
			name string
			got  []*corev1.ConfigMap
			want string
		}{
			{"list all", c.List(nil), "[four one owned three]"},
			{"list selector", c.List(labels.SelectorFromSet(labels.Set{"app": "x"})), "[owned]"},
			{"by namespace", c.ByIndex(IndexNamespace, "a"), "[four one owned three]"},
			{"by owner", c.ByIndex(IndexOwner, string(one.UID)), "[owned]"},
			{"by other owner", c.ByIndex(IndexOwner, "nobody"), "[]"},
		} {
			if got := fmt.Sprint(names(tc.got)); got != tc.want {
				t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
			}
		}
	})

	t.Run("late handler replays the cache", func(t *testing.T) {
		var late recorder
		c.AddHandler(late.handler())
		got, _ := late.take()
		wantLines(t, got, []string{"ADD a/four", "ADD a/one", "ADD a/owned", "ADD a/three"})
	})

	t.Run("duplicates and stale events are skipped", func(t *testing.T) {
		before := c.Stats()
		for _, ev := range evs {
			c.apply(ev, nil, false)
		}
		// An event older than the delete of a/two, as a broken redelivery
		// could bring: the tombstone keeps it out.
		stale := *evs[2]
		stale.Type, stale.Revision = events.Modified, stale.Revision-1
		c.apply(&stale, nil, false)
		after := c.Stats()
		if got := after.Skipped - before.Skipped; got != int64(len(evs))+1 || after.Applied != before.Applied {
			t.Errorf("skipped %d, applied %d, want %d skipped and 0 applied", got, after.Applied-before.Applied, len(evs)+1)
		}
		if got, _ := rec.take(); len(got) != 0 {
			t.Errorf("handlers called for duplicates: %v", got)
		}
		if _, ok := c.Get("a", "two"); ok {
			t.Error("stale event brought a/two back")
		}
	})

	t.Run("unstructured", func(t *testing.T) {
		u, err := NewCache(CacheConfig[*unstructured.Unstructured]{Resource: configmaps, Namespace: "a", Config: env.Config, JS: env.JS})
		if err != nil {
			t.Fatal(err)
		}
		run(t, u)
		if err := u.WaitForSync(testCtx(t, 10*time.Second)); err != nil {
			t.Fatal(err)
		}
		o, ok := u.Get("a", "one")
		if !ok || o.GetKind() != "ConfigMap" || o.Object["data"].(map[string]any)["v"] != "2" {
			t.Errorf("unstructured a/one: %v %v", o, ok)
		}
	})
}

// TestCacheNode checks a kubelet's cache: only the pods bound to its node,
// from the snapshot (a field selector) and from the log (the subject).
func TestCacheNode(t *testing.T) {
	env := controlplanetest.Start(t)
	ctx := testCtx(t, 30*time.Second)
	pod := func(name, node string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
			Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
		}
	}
	pods := env.Client.CoreV1().Pods("default")
	for _, p := range []*corev1.Pod{pod("mine-0", "node-1"), pod("theirs-0", "node-2"), pod("pending-0", "")} {
		if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	c, err := NewCache(CacheConfig[*corev1.Pod]{Resource: corev1.SchemeGroupVersion.WithResource("pods"), Node: "node-1", Config: env.Config, JS: env.JS})
	if err != nil {
		t.Fatal(err)
	}
	run(t, c)
	if err := c.WaitForSync(ctx); err != nil {
		t.Fatal(err)
	}
	var last *corev1.Pod
	for _, p := range []*corev1.Pod{pod("mine-1", "node-1"), pod("theirs-1", "node-2")} {
		if last, err = pods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pods.Create(ctx, pod("mine-2", "node-1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "mine-2", func() bool { _, ok := c.Get("default", "mine-2"); return ok })
	var names []string
	for _, p := range c.List(nil) {
		names = append(names, p.Name)
	}
	if fmt.Sprint(names) != "[mine-0 mine-1 mine-2]" {
		t.Errorf("node-1 cache holds %v", names)
	}
	if c.Revision() <= rev(t, last) {
		t.Errorf("revision %d, want > %d", c.Revision(), rev(t, last))
	}
}

// TestCacheNamed: a cache of one name holds that object alone, from the
// snapshot (a field selector) and from the log (the name token).
func TestCacheNamed(t *testing.T) {
	env := controlplanetest.Start(t)
	ctx := testCtx(t, 30*time.Second)
	nodes := env.Client.CoreV1().Nodes()
	var last string
	for _, name := range []string{"node-1", "node-2"} {
		n, err := nodes.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		last = n.ResourceVersion
	}
	// The creates on the log first: a create published after the cache's
	// seek would be delivered (and skipped as part of the snapshot).
	rev, err := events.ParseRevision(last)
	if err != nil {
		t.Fatal(err)
	}
	if err := events.WaitPublished(ctx, env.JS, rev); err != nil {
		t.Fatal(err)
	}
	c, err := NewCache(CacheConfig[*corev1.Node]{Resource: corev1.SchemeGroupVersion.WithResource("nodes"), Name: "node-1", Config: env.Config, JS: env.JS})
	if err != nil {
		t.Fatal(err)
	}
	run(t, c)
	if err := c.WaitForSync(ctx); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"node-2", "node-1"} {
		n, err := nodes.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n.Labels = map[string]string{"zone": "a"}
		if _, err := nodes.Update(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 10*time.Second, "node-1 relabelled", func() bool { n, ok := c.Get("", "node-1"); return ok && n.Labels["zone"] == "a" })
	if got := c.List(nil); len(got) != 1 || got[0].Name != "node-1" {
		t.Errorf("the cache of node-1 holds %d objects: %v", len(got), got)
	}
	if st := c.Stats(); st.Delivered != 1 {
		t.Errorf("%d events delivered, want node-1's update alone", st.Delivered)
	}
}

// TestCacheRelist stops a cache, changes objects and purges the log behind
// it: the resumed cache finds its position gone (events.ErrTooOld), takes a
// new snapshot and reports the difference.
func TestCacheRelist(t *testing.T) {
	env := controlplanetest.Start(t)
	mkNamespace(t, env, "r")
	mkNamespace(t, env, "x")
	mustCreate(t, env, cm("r", "keep", nil))
	change := mustCreate(t, env, cm("r", "change", nil))
	mustCreate(t, env, cm("r", "gone", nil))

	c := newCMCache(t, env, "r")
	var rec recorder
	c.AddHandler(rec.handler())
	stop := run(t, c)
	if err := c.WaitForSync(testCtx(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	stop()
	rec.take()

	// Stopped and started again, the cache resumes from its position: the
	// change made meanwhile comes from the log, with its event.
	keep, _ := c.Get("r", "keep")
	keep = keep.DeepCopy()
	keep.Data = map[string]string{"v": "2"}
	keep = mustUpdate(t, env, keep)
	stop = run(t, c)
	eventually(t, 10*time.Second, "r/keep updated", func() bool { return c.Revision() >= rev(t, keep) })
	stop()
	got, _ := rec.take()
	wantLines(t, got, []string{"UPDATE r/keep ev"})
	if n := c.Stats().Lists; n != 1 {
		t.Errorf("resuming took %d snapshots, want 1", n)
	}

	change.Data = map[string]string{"v": "2"}
	mustUpdate(t, env, change)
	mustDelete(t, env, "r", "gone")
	mustCreate(t, env, cm("r", "new", nil))
	last := mustCreate(t, env, cm("x", "last", nil))
	eventAt(t, env, "x", "last", rev(t, last))
	ctx := testCtx(t, 20*time.Second)
	s, err := env.JS.Stream(ctx, events.Stream)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Purge(ctx, jetstream.WithPurgeKeep(1)); err != nil {
		t.Fatal(err)
	}
	if _, err := events.SeekRevision(ctx, env.JS, events.Stream, c.Revision()+1); err == nil {
		t.Fatal("purge left the cache's position on the log")
	}

	run(t, c)
	eventually(t, 10*time.Second, "a second snapshot", func() bool { return c.Stats().Lists == 2 })
	got, _ = rec.take()
	wantLines(t, got, []string{"UPDATE r/change", "ADD r/new", "DELETE r/gone"})
	if o, ok := c.Get("r", "change"); !ok || o.Data["v"] != "2" {
		t.Errorf("r/change after relist: %v", o)
	}

	// And the tail goes on from the new snapshot.
	mustCreate(t, env, cm("r", "after", nil))
	eventually(t, 10*time.Second, "r/after", func() bool { _, ok := c.Get("r", "after"); return ok })
	got, _ = rec.take()
	wantLines(t, got, []string{"ADD r/after ev"})
}

// TestCacheStartsFast writes a long history (20,000 events) and checks that
// a new cache starts in seconds: one LIST and a tail from its revision, not
// a replay of the log.
func TestCacheStartsFast(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 20,000 events")
	}
	env := controlplanetest.Start(t)
	const (
		writers = 8
		objects = 200
		total   = 20000
	)
	ctx := testCtx(t, 2*time.Minute)
	cms := env.Client.CoreV1().ConfigMaps("default")
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	var lastMu sync.Mutex
	var last events.Revision
	for w := range writers {
		wg.Go(func() {
			var objs []*corev1.ConfigMap
			for i := range objects / writers {
				o, err := cms.Create(ctx, cm("default", fmt.Sprintf("cm-%d-%d", w, i), map[string]string{"n": "0"}), metav1.CreateOptions{})
				if err != nil {
					errs <- err
					return
				}
				objs = append(objs, o)
			}
			for n := range total/writers - objects/writers {
				o := objs[n%len(objs)]
				o.Data["n"] = fmt.Sprint(n)
				o, err := cms.Update(ctx, o, metav1.UpdateOptions{})
				if err != nil {
					errs <- err
					return
				}
				objs[n%len(objs)] = o
				if r := rev(t, o); r > 0 {
					lastMu.Lock()
					last = max(last, r)
					lastMu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	t.Logf("wrote %d events in %v", total, time.Since(start).Round(time.Millisecond))
	eventAt(t, env, "", "", last)

	begin := time.Now()
	c := newCMCache(t, env, "")
	run(t, c)
	if err := c.WaitForSync(ctx); err != nil {
		t.Fatal(err)
	}
	synced := time.Since(begin)
	probe := mustCreate(t, env, cm("default", "probe", nil))
	eventually(t, 5*time.Second, "the probe", func() bool { return c.Revision() >= rev(t, probe) })
	t.Logf("synced %d objects in %v, first new event after %v; stats %+v", c.Len(), synced, time.Since(begin), c.Stats())
	if synced > 3*time.Second {
		t.Errorf("sync took %v, want < 3s", synced)
	}
	if c.Len() < objects || c.Stats().Delivered > 50 {
		t.Errorf("cache holds %d objects and read %d events, want >= %d and a handful", c.Len(), c.Stats().Delivered, objects)
	}
}
