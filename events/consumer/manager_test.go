package consumer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
)

func newTestManager(t *testing.T, env *controlplanetest.Env) *Manager {
	t.Helper()
	m, err := NewManager(ManagerOptions{RestConfig: env.Config, JS: env.JS})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestManagerSharesCaches: the second request for a resource (same scope,
// same type) gets the first one's cache; another scope or type is another
// cache; MetaFor views the typed cache.
func TestManagerSharesCaches(t *testing.T) {
	env := controlplanetest.Start(t)
	m := newTestManager(t, env)
	a, err := CacheFor[*corev1.ConfigMap](m, configmaps)
	if err != nil {
		t.Fatal(err)
	}
	b, err := CacheFor[*corev1.ConfigMap](m, configmaps)
	if err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Fatal("two caches of configmaps in one manager")
	}
	ns, err := CacheFor[*corev1.ConfigMap](m, configmaps, InNamespace("default"))
	if err != nil {
		t.Fatal(err)
	}
	if ns == a {
		t.Error("the cache of one namespace is the cache of all of them")
	}
	meta, err := MetaFor(m, configmaps)
	if err != nil {
		t.Fatal(err)
	}
	if meta != Meta(a) {
		t.Error("MetaFor built a cache of its own next to the typed one")
	}
	pom, err := CacheFor[*metav1.PartialObjectMetadata](m, configmaps)
	if err != nil {
		t.Fatal(err)
	}
	if any(pom) == any(a) {
		t.Error("caches of two types are one")
	}
	if len(m.order) != 3 {
		t.Errorf("manager holds %d caches, want 3", len(m.order))
	}
	if _, err := CacheFor[*corev1.ConfigMap](m, configmaps, WithMetaIndex("x", nil), WithIndexers(map[string]IndexFunc[*corev1.Secret]{"y": nil})); !errors.Is(err, ErrConfig) {
		t.Errorf("an index of another type: %v, want ErrConfig", err)
	}
}

// TestManagerMergesIndexers: indexes asked for by two consumers are both
// kept, also when the second asks after the cache has synced (what it
// holds is indexed then).
func TestManagerMergesIndexers(t *testing.T) {
	env := controlplanetest.Start(t)
	ctx := testCtx(t, time.Minute)
	mkNamespace(t, env, "ix")
	mustCreate(t, env, cm("ix", "one", map[string]string{"color": "red", "size": "s"}))
	m := newTestManager(t, env)
	byData := func(key string) IndexFunc[*corev1.ConfigMap] {
		return func(c *corev1.ConfigMap) []string { return []string{c.Data[key]} }
	}
	c, err := CacheFor[*corev1.ConfigMap](m, configmaps, WithIndexers(map[string]IndexFunc[*corev1.ConfigMap]{"color": byData("color")}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := CacheFor[*corev1.ConfigMap](m, configmaps, WithMetaIndex("name", func(o metav1.Object) []string { return []string{o.GetName()} })); err != nil {
		t.Fatal(err)
	}
	run(t, m)
	if err := m.WaitForSync(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := CacheFor[*corev1.ConfigMap](m, configmaps, WithIndexers(map[string]IndexFunc[*corev1.ConfigMap]{"size": byData("size")})); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, env, cm("ix", "two", map[string]string{"color": "red", "size": "m"}))
	eventually(t, 30*time.Second, "the second configmap", func() bool { _, ok := c.Get("ix", "two"); return ok })
	for _, tc := range []struct {
		index, value string
		want         []string
	}{
		{"color", "red", []string{"one", "two"}},
		{"name", "one", []string{"one"}},
		{"size", "s", []string{"one"}},
		{"size", "m", []string{"two"}},
	} {
		var got []string
		for _, o := range c.ByIndex(tc.index, tc.value) {
			got = append(got, o.Name)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("ByIndex(%s, %s) = %v, want %v", tc.index, tc.value, got, tc.want)
		}
	}
}

// TestManagerRun: Run runs what was registered before and after it
// started, and returns only once every one of them has returned; a part
// that fails stops the others and its error is Run's.
func TestManagerRun(t *testing.T) {
	env := controlplanetest.Start(t)
	m := newTestManager(t, env)
	if _, err := CacheFor[*corev1.ConfigMap](m, configmaps); err != nil {
		t.Fatal(err)
	}
	var running, returned atomic.Int32
	slow := RunnerFunc(func(ctx context.Context) error {
		running.Add(1)
		<-ctx.Done()
		time.Sleep(200 * time.Millisecond)
		returned.Add(1)
		return nil
	})
	m.Add("before", slow)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	sctx := testCtx(t, time.Minute)
	if err := m.WaitForSync(sctx); err != nil {
		t.Fatal(err)
	}
	m.Add("after", slow)
	late, err := CacheFor[*corev1.Secret](m, corev1.SchemeGroupVersion.WithResource("secrets"))
	if err != nil {
		t.Fatal(err)
	}
	if err := late.WaitForSync(sctx); err != nil {
		t.Fatalf("a cache registered while the manager runs: %v", err)
	}
	eventually(t, 10*time.Second, "both parts to run", func() bool { return running.Load() == 2 })
	if err := m.Run(ctx); !errors.Is(err, ErrRunning) {
		t.Errorf("second Run: %v, want ErrRunning", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if n := returned.Load(); n != 2 {
		t.Errorf("Run returned with %d of 2 parts returned", n)
	}

	m2 := newTestManager(t, env)
	boom := errors.New("boom")
	m2.Add("slow", slow)
	m2.Add("failing", RunnerFunc(func(ctx context.Context) error { return boom }))
	if err := m2.Run(context.Background()); !errors.Is(err, boom) {
		t.Errorf("Run with a failing part: %v, want boom", err)
	}
	if n := returned.Load(); n != 3 {
		t.Errorf("Run returned before the other part (%d returned, want 3)", n)
	}
}

// TestManagerReady: Ready fails until the manager runs, while a component
// is starting, and while a cache has not synced, naming it.
func TestManagerReady(t *testing.T) {
	env := controlplanetest.Start(t)
	ctx := testCtx(t, time.Minute)
	m := newTestManager(t, env)
	if _, err := CacheFor[*corev1.ConfigMap](m, configmaps); err != nil {
		t.Fatal(err)
	}
	if err := m.Ready(); !errors.Is(err, ErrNotReady) {
		t.Errorf("before Run: %v, want ErrNotReady", err)
	}
	starting := m.Starting("discovery")
	run(t, m)
	time.Sleep(200 * time.Millisecond)
	if err := m.Ready(); !errors.Is(err, ErrNotReady) {
		t.Errorf("while starting: %v, want ErrNotReady", err)
	}
	starting()
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := m.WaitForSync(wctx); err != nil {
		t.Fatal(err)
	}
	if err := m.Ready(); err != nil {
		t.Fatalf("synced: %v", err)
	}
	// The apiserver serves no such resource: the cache never syncs.
	never := corev1.SchemeGroupVersion.WithResource("nonesuches")
	if _, err := CacheFor[*corev1.ConfigMap](m, never); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	err := m.Ready()
	if !errors.Is(err, ErrNotReady) {
		t.Fatalf("a cache that cannot sync: %v, want ErrNotReady", err)
	}
	if want := never.String() + " not synced"; !strings.Contains(err.Error(), want) {
		t.Errorf("Ready() = %q, want it to name %q", err, want)
	}
	sctx, scancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer scancel()
	if err := m.WaitForSync(sctx); err == nil {
		t.Error("WaitForSync returned with a cache not synced")
	}
}

// TestManagerWaitForLog: after WaitForLog, every cache of the manager
// (those registered late too) holds every write acknowledged before.
func TestManagerWaitForLog(t *testing.T) {
	env := controlplanetest.Start(t)
	ctx := testCtx(t, time.Minute)
	mkNamespace(t, env, "wl")
	m := newTestManager(t, env)
	cms, err := CacheFor[*corev1.ConfigMap](m, configmaps, InNamespace("wl"))
	if err != nil {
		t.Fatal(err)
	}
	run(t, m)
	if err := m.WaitForSync(ctx); err != nil {
		t.Fatal(err)
	}
	secrets, err := CacheFor[*corev1.Secret](m, corev1.SchemeGroupVersion.WithResource("secrets"), InNamespace("wl"))
	if err != nil {
		t.Fatal(err)
	}
	for round := range 3 {
		var last events.Revision
		for i := range 10 {
			mustCreate(t, env, cm("wl", fmt.Sprintf("c-%d-%d", round, i), nil))
			s, err := env.Client.CoreV1().Secrets("wl").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("s-%d-%d", round, i)}}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			last = rev(t, s)
		}
		if err := events.WaitPublished(ctx, env.JS, last); err != nil {
			t.Fatal(err)
		}
		if err := m.WaitForLog(ctx); err != nil {
			t.Fatal(err)
		}
		if _, ok := cms.Get("wl", fmt.Sprintf("c-%d-9", round)); !ok {
			t.Errorf("round %d: the configmap cache lags after WaitForLog", round)
		}
		if _, ok := secrets.Get("wl", fmt.Sprintf("s-%d-9", round)); !ok {
			t.Errorf("round %d: the secret cache (registered late) lags after WaitForLog", round)
		}
	}
}

// TestManagerControllers: a controller registered on the manager runs
// with it, and Resync queues every object of its For source, with the
// cause given.
func TestManagerControllers(t *testing.T) {
	env := controlplanetest.Start(t)
	ctx := testCtx(t, time.Minute)
	mkNamespace(t, env, "rc")
	for i := range 3 {
		mustCreate(t, env, cm("rc", fmt.Sprintf("r-%d", i), nil))
	}
	m := newTestManager(t, env)
	cache, err := CacheFor[*corev1.ConfigMap](m, configmaps, InNamespace("rc"))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	seen := map[string][]string{}
	ctrl, err := m.NewController(ControllerConfig{Name: "test", WaitFor: []Syncer{cache},
		Reconciler: ReconcilerFunc(func(ctx context.Context, req Request) (Result, error) {
			mu.Lock()
			defer mu.Unlock()
			seen[req.Key] = append(seen[req.Key], req.Cause.EventID)
			return Result{}, nil
		})})
	if err != nil {
		t.Fatal(err)
	}
	For(cache, ctrl, nil)
	if got := m.Controllers(); !slices.Equal(got, []string{"test"}) {
		t.Errorf("Controllers() = %v", got)
	}
	run(t, m)
	count := func(id string) int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, ids := range seen {
			if slices.Contains(ids, id) {
				n++
			}
		}
		return n
	}
	eventually(t, 30*time.Second, "the snapshot's keys to be reconciled", func() bool { return count("") == 3 })
	if err := m.WaitForSync(ctx); err != nil {
		t.Fatal(err)
	}
	m.Resync(&events.Event{ID: "takeover"})
	eventually(t, 30*time.Second, "a resync of every key", func() bool { return count("takeover") == 3 })
}

// TestManagerShared: Shared builds a part once per key and runs it.
func TestManagerShared(t *testing.T) {
	env := controlplanetest.Start(t)
	m := newTestManager(t, env)
	var built, ran atomic.Int32
	build := func() (RunnerFunc, error) {
		built.Add(1)
		return func(ctx context.Context) error { ran.Add(1); <-ctx.Done(); return nil }, nil
	}
	for range 3 {
		if _, err := Shared(m, "part", build); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Shared(m, "part", func() (*Controller, error) { return nil, nil }); !errors.Is(err, ErrConfig) {
		t.Errorf("a key asked for as another type: %v, want ErrConfig", err)
	}
	run(t, m)
	eventually(t, 10*time.Second, "the part to run", func() bool { return ran.Load() == 1 })
	if built.Load() != 1 {
		t.Errorf("built %d times, want 1", built.Load())
	}
}

// TestSubjectPartitions: a replica follows exactly the subject partitions
// of the keys its shard partitions hold.
func TestSubjectPartitions(t *testing.T) {
	for _, n := range []int{1, 4, 16, 32} {
		leased := []int{0, n - 1}
		parts := SubjectPartitions(leased, n)
		for i := range 2000 {
			key := fmt.Sprintf("ns-%d/rs-%d", i%7, i)
			held := slices.Contains(leased, int(events.KeyHash(key)%uint32(n)))
			var sp int
			if _, err := fmt.Sscan(events.Partition(SplitKey(key)), &sp); err != nil {
				t.Fatal(err)
			}
			if slices.Contains(parts, sp) != held {
				t.Fatalf("n=%d: key %s in subject partition %d: followed %v, leased %v", n, key, sp, !held, held)
			}
		}
	}
	if got := SubjectPartitions([]int{1}, 5); got != nil {
		t.Errorf("5 partitions (not a divisor of %d): %v, want nil (every pod)", events.Partitions, got)
	}
	if got := SubjectPartitions(nil, 32); got == nil || len(got) != 0 {
		t.Errorf("nothing leased: %v, want an empty set (only pods without a controller)", got)
	}
}

// TestManagerSharded: two sharded managers split the keys of a controller
// (every key is held by exactly one); when one stops, the other takes its
// partitions over, catches up and resyncs every key with its marker
// write's event as the cause.
func TestManagerSharded(t *testing.T) {
	env := controlplanetest.Start(t)
	ctx := testCtx(t, 2*time.Minute)
	mkNamespace(t, env, "sh")
	for i := range 20 {
		mustCreate(t, env, cm("sh", fmt.Sprintf("k-%d", i), nil))
	}
	type replica struct {
		m     *Manager
		stop  context.CancelFunc
		mu    sync.Mutex
		cause map[string]string // key -> event id of its last reconcile
	}
	start := func(id string) *replica {
		m, err := NewManager(ManagerOptions{RestConfig: env.Config, JS: env.JS,
			Shard: &ShardOptions{Group: "test", Identity: id, Partitions: 4, LeaseTTL: 2 * time.Second, Marker: "test-"}})
		if err != nil {
			t.Fatal(err)
		}
		r := &replica{m: m, cause: map[string]string{}}
		cache, err := CacheFor[*corev1.ConfigMap](m, configmaps, InNamespace("sh"))
		if err != nil {
			t.Fatal(err)
		}
		ctrl, err := m.NewController(ControllerConfig{Name: "test", WaitFor: []Syncer{cache},
			Reconciler: ReconcilerFunc(func(ctx context.Context, req Request) (Result, error) {
				r.mu.Lock()
				defer r.mu.Unlock()
				r.cause[req.Key] = req.Cause.EventID
				return Result{}, nil
			})})
		if err != nil {
			t.Fatal(err)
		}
		For(cache, ctrl, nil)
		r.stop = run(t, m)
		return r
	}
	a, b := start("a"), start("b")
	keys := make([]string, 20)
	for i := range keys {
		keys[i] = fmt.Sprintf("sh/k-%d", i)
	}
	owners := func(key string) int {
		n := 0
		for _, r := range []*replica{a, b} {
			if r.m.Owns()(key) {
				n++
			}
		}
		return n
	}
	eventually(t, time.Minute, "the partitions to be split", func() bool {
		return len(a.m.Sharder().Held())+len(b.m.Sharder().Held()) == 4 && len(a.m.Sharder().Held()) > 0 && len(b.m.Sharder().Held()) > 0
	})
	for _, k := range keys {
		if n := owners(k); n != 1 {
			t.Errorf("%s is held by %d replicas", k, n)
		}
	}
	b.stop()
	eventually(t, time.Minute, "a to hold every partition", func() bool { return len(a.m.Sharder().Held()) == 4 })
	eventually(t, 30*time.Second, "a to resync every key with its takeover's cause", func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		for _, k := range keys {
			if a.cause[k] == "" {
				return false
			}
		}
		return true
	})
	l, err := env.Client.CoordinationV1().Leases("kube-system").Get(ctx, "test-a", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("a's marker lease: %v", err)
	}
	if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != "a" {
		t.Errorf("marker lease held by %v", l.Spec.HolderIdentity)
	}
}
