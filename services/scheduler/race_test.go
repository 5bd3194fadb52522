package scheduler

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
)

// barrier holds the first n bindings, of any replica, until n are waiting:
// every decision made before they are let through was made without seeing
// any of them, as when replicas decide at the same moment. Later bindings
// pass. A barrier that never fills opens after wait.
type barrier struct {
	n       int
	mu      sync.Mutex
	waiting int
	open    chan struct{}
}

func newBarrier(n int) *barrier { return &barrier{n: n, open: make(chan struct{})} }

func (b *barrier) hold(*corev1.Pod) {
	b.mu.Lock()
	if b.waiting++; b.waiting == b.n {
		close(b.open)
	}
	b.mu.Unlock()
	select {
	case <-b.open:
	case <-time.After(wait):
	}
}

// holdBindings makes a replica's bindings wait at whatever barrier *b
// points to (none: they pass).
func holdBindings(b *atomic.Pointer[barrier]) func(*Scheduler) {
	return func(s *Scheduler) {
		s.beforeBind = func(p *corev1.Pod) {
			if cur := b.Load(); cur != nil {
				cur.hold(p)
			}
		}
	}
}

// shardedPair starts two sharded replicas and waits until they split the
// partitions between them.
func shardedPair(t *testing.T, env *controlplanetest.Env, setup ...func(*Scheduler)) (a, b *Scheduler) {
	t.Helper()
	a = startReplica(t, env, Config{Identity: "a", Sharded: true}, setup...)
	b = startReplica(t, env, Config{Identity: "b", Sharded: true}, setup...)
	waitSplit(t, a, b)
	return a, b
}

func waitSplit(t *testing.T, a, b *Scheduler) {
	t.Helper()
	eventually(t, wait, "partitions split between the replicas", func() bool {
		ha, hb := a.sharder.Held(), b.sharder.Held()
		for _, p := range ha {
			if slices.Contains(hb, p) {
				return false
			}
		}
		return len(ha) > 0 && len(hb) > 0 && len(ha)+len(hb) == 32
	})
}

// ownedBy returns n pod names of the form prefix-i whose keys (in ns) the
// replica owns.
func ownedBy(s *Scheduler, ns, prefix string, n int) []string {
	var out []string
	for i := 0; len(out) < n; i++ {
		name := fmt.Sprintf("%s-%d", prefix, i)
		if s.sharder.Owns(ns + "/" + name) {
			out = append(out, name)
		}
	}
	return out
}

// TestShardedBindsOnce: sharded replicas split the pods; while the second
// replica joins and partitions move to it, pods keep being created, and
// none is bound twice (no binding refused as "already assigned"): a
// partition moves only once the bindings of its pods are on the log.
func TestShardedBindsOnce(t *testing.T) {
	env := controlplanetest.Start(t)
	var nodes []*corev1.Node
	for i := range 10 {
		nodes = append(nodes, newNode(fmt.Sprintf("n%d", i), "64", "256Gi", 500))
	}
	createNodes(t, env, nodes...)
	a := startReplica(t, env, Config{Identity: "a", Sharded: true})
	eventually(t, wait, "replica a holds every partition", func() bool { return len(a.sharder.Held()) == 32 })
	var created atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				p := newPod("default", fmt.Sprintf("p%d-%d", w, i), "10m", "10Mi")
				if _, err := env.Client.CoreV1().Pods("default").Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
					t.Errorf("create %s: %v", p.Name, err)
					return
				}
				created.Add(1)
			}
		})
	}
	// b joins while pods keep coming; go on until it has scheduled some.
	eventually(t, wait, "pods being created", func() bool { return created.Load() > 100 })
	joined := time.Now()
	b := startReplica(t, env, Config{Identity: "b", Sharded: true})
	synced := time.Since(joined)
	waitSplit(t, a, b)
	t.Logf("b joined: caches synced after %v, partitions split (a %d, b %d) after %v",
		synced.Round(time.Millisecond), len(a.sharder.Held()), len(b.sharder.Held()), time.Since(joined).Round(time.Millisecond))
	eventually(t, wait, "replica b scheduling", func() bool { return b.Stats().Scheduled > 50 })
	close(stop)
	wg.Wait()
	total := created.Load()
	eventually(t, wait, "every pod bound", func() bool { return a.Stats().Scheduled+b.Stats().Scheduled >= total })
	sa, sb := a.Stats(), b.Stats()
	t.Logf("%d pods; replica a %+v; replica b %+v", total, sa, sb)
	if sa.Conflicts != 0 || sb.Conflicts != 0 {
		t.Fatalf("bindings refused as already bound: a %d, b %d", sa.Conflicts, sb.Conflicts)
	}
	if sa.Scheduled+sb.Scheduled != total {
		t.Fatalf("%d bindings for %d pods", sa.Scheduled+sb.Scheduled, total)
	}
	c := replay(t, env, nodes)
	if int64(len(c.bindings)) != total {
		t.Fatalf("the log shows %d pods bound, want %d", len(c.bindings), total)
	}
	for key, n := range c.bindings {
		if n != 1 {
			t.Fatalf("%s bound %d times", key, n)
		}
	}
}

// TestOvercommitRace: two sharded replicas each place their pods on the
// node every pod prefers, at the same moment (their bindings are held
// until each has decided about half its pods), so together they give it
// twice what it holds. The apiserver refuses the bindings that do not fit
// (409 with a fit.CauseOvercommitted cause); the replicas requeue those
// pods and bind them elsewhere; no revision of the log has the node
// overcommitted.
func TestOvercommitRace(t *testing.T) {
	env := controlplanetest.Start(t)
	fast := newNode("fast", "1", "8Gi", 110) // 10 pods of 100m
	fast.Labels["tier"] = "fast"
	nodes := []*corev1.Node{fast, newNode("slow-1", "8", "16Gi", 110), newNode("slow-2", "8", "16Gi", 110)}
	createNodes(t, env, nodes...)
	var hold atomic.Pointer[barrier]
	a, b := shardedPair(t, env, holdBindings(&hold))
	const perReplica = 20
	hold.Store(newBarrier(perReplica)) // about 10 decisions each
	names := [2][]string{ownedBy(a, "default", "web", perReplica), ownedBy(b, "default", "web", perReplica)}
	for i := range perReplica {
		for _, r := range names {
			p := newPod("default", r[i], "100m", "100Mi")
			p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{
				Weight: 100, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{
					Key: "tier", Operator: corev1.NodeSelectorOpIn, Values: []string{"fast"}}}}}}}}
			controlplanetest.CreatePod(t, env, p)
		}
	}
	eventually(t, wait, "every pod bound", func() bool { return a.Stats().Scheduled+b.Stats().Scheduled >= 2*perReplica })
	sa, sb := a.Stats(), b.Stats()
	t.Logf("replica a %+v; replica b %+v", sa, sb)
	if sa.Overcommits+sb.Overcommits == 0 {
		t.Fatal("the apiserver refused no binding: the replicas did not race for the node")
	}
	if sa.Conflicts+sb.Conflicts != 0 {
		t.Fatalf("already-bound conflicts between sharded replicas: %d", sa.Conflicts+sb.Conflicts)
	}
	c := replay(t, env, nodes)
	onFast := 0
	for key, n := range c.bindings {
		if n != 1 {
			t.Fatalf("%s bound %d times", key, n)
		}
		if c.node[key] == "fast" {
			onFast++
		}
	}
	if len(c.bindings) != 2*perReplica || onFast == 0 || onFast > 10 {
		t.Fatalf("%d pods bound, %d on fast (at most 10 fit)", len(c.bindings), onFast)
	}
}

// TestAntiAffinityRace: two sharded replicas place two pods that must not
// share a node at the same moment (their bindings are held until both have
// decided), on the only node. The apiserver accepts both; the replica whose
// binding came second in the log finds the conflict when the log confirms
// it. Owned by a controller, that pod is evicted (Descheduled) and the
// other stays; bare, both stay and the later one gets a Warning event.
func TestAntiAffinityRace(t *testing.T) {
	env := controlplanetest.Start(t)
	ctx := context.Background()
	n1, n2 := newNode("n1", "8", "16Gi", 110), newNode("n2", "8", "16Gi", 110)
	n1.Labels["pair"], n2.Labels["pair"] = "owned", "bare"
	createNodes(t, env, n1, n2)
	var hold atomic.Pointer[barrier]
	a, b := shardedPair(t, env, holdBindings(&hold))
	rs, err := env.Client.AppsV1().ReplicaSets("default").Create(ctx, &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "db"},
		Spec: appsv1.ReplicaSetSpec{Replicas: new(int32), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "db"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		pair  string
		owned bool
	}{{"owned", true}, {"bare", false}} {
		t.Run(tc.pair, func(t *testing.T) {
			before := a.Stats().Violations + b.Stats().Violations
			hold.Store(newBarrier(2))
			app := "db-" + tc.pair
			var pods []string
			for _, s := range []*Scheduler{a, b} {
				name := ownedBy(s, "default", app, 1)[0]
				p := newPod("default", name, "100m", "100Mi")
				p.Labels["app"] = app
				p.Spec.NodeSelector = map[string]string{"pair": tc.pair}
				p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
					TopologyKey: corev1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}}}}}
				if tc.owned {
					p.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(rs, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))}
				}
				controlplanetest.CreatePod(t, env, p)
				pods = append(pods, name)
			}
			eventually(t, wait, "both pods bound", func() bool {
				return controlplanetest.GetPod(t, env, "default", pods[0]).Spec.NodeName != "" && controlplanetest.GetPod(t, env, "default", pods[1]).Spec.NodeName != ""
			})
			eventually(t, wait, "the violation caught", func() bool { return a.Stats().Violations+b.Stats().Violations > before })
			c := replay(t, env, []*corev1.Node{n1, n2})
			later, earlier := pods[0], pods[1]
			if c.boundAt["default/"+later] < c.boundAt["default/"+earlier] {
				later, earlier = earlier, later
			}
			reason := ReasonAntiAffinityViolated
			if tc.owned {
				reason = ReasonDescheduled
				eventually(t, wait, "the later pod evicted", func() bool { return controlplanetest.GetPod(t, env, "default", later).DeletionTimestamp != nil })
			}
			eventually(t, wait, reason+" event on the later pod", func() bool {
				evs, err := env.Client.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("reason", reason).String()})
				if err != nil {
					t.Fatal(err)
				}
				for _, e := range evs.Items {
					if e.InvolvedObject.Name == later {
						return true
					}
				}
				return false
			})
			if p := controlplanetest.GetPod(t, env, "default", earlier); p.DeletionTimestamp != nil || p.Spec.NodeName != "n"+map[bool]string{true: "1", false: "2"}[tc.owned] {
				t.Fatalf("the earlier pod %s: node %q, deleted %v", earlier, p.Spec.NodeName, p.DeletionTimestamp)
			}
			if !tc.owned {
				if p := controlplanetest.GetPod(t, env, "default", later); p.DeletionTimestamp != nil {
					t.Fatalf("bare pod %s evicted", later)
				}
			}
			sa, sb := a.Stats(), b.Stats()
			if got := sa.Violations + sb.Violations - before; got != 1 {
				t.Fatalf("%d violations caught, want 1 (a %+v, b %+v)", got, sa, sb)
			}
			if sa.Descheduled+sb.Descheduled != 1 { // the owned pair's later pod only
				t.Fatalf("%d pods evicted, want 1", sa.Descheduled+sb.Descheduled)
			}
		})
	}
}
