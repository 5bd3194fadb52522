package scheduler

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/schemas/fit"
	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const wait = 60 * time.Second

// startReplica runs a scheduler replica until the test ends and waits for
// its caches; setup, if given, adjusts it before it runs.
func startReplica(t testing.TB, env *controlplanetest.Env, cfg Config, setup ...func(*Scheduler)) *Scheduler {
	t.Helper()
	cfg.RestConfig = env.ConfigFor(controlplanetest.SchedulerToken)
	cfg.JS = env.JS
	if cfg.Log == nil {
		cfg.Log = controlplanetest.Logger("SCHED_TEST_LOG")
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range setup {
		f(s)
	}
	controlplanetest.RunSynced(t, s)
	return s
}

func eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func newNode(name, cpu, mem string, pods int, taints ...corev1.Taint) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}},
		Spec: corev1.NodeSpec{Taints: taints}}
	n.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem),
		corev1.ResourceEphemeralStorage: resource.MustParse("100Gi"), corev1.ResourcePods: *resource.NewQuantity(int64(pods), resource.DecimalSI)}
	n.Status.Capacity = n.Status.Allocatable
	return n
}

func newPod(ns, name, cpu, mem string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{}}}
	p.Spec.Containers = []corev1.Container{{Name: "c", Image: "busybox", Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}}}}
	return p
}

func createNodes(t testing.TB, env *controlplanetest.Env, nodes ...*corev1.Node) {
	t.Helper()
	for _, n := range nodes {
		if _, err := env.Client.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create node %s: %v", n.Name, err)
		}
	}
}

func scheduledCondition(p *corev1.Pod) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == corev1.PodScheduled {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// podEvents reads every pod event on the log, in order.
func podEvents(t testing.TB, env *controlplanetest.Env) []*events.Event {
	t.Helper()
	// The last bindings may be committed and not yet published.
	controlplanetest.WaitForLog(t, env)
	var out []*events.Event
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	err := events.Tail(ctx, env.JS, events.TailOptions{Group: "core", Resource: "pods"}, func(ev *events.Event) error {
		out = append(out, ev)
		return nil
	})
	if err != nil {
		t.Fatalf("tail: %v", err)
	}
	return out
}

// overcommitChecker replays pod events in log order, keeping per-node sums
// of the requests of the pods counted there (bound, not finished), and
// reports every revision at which a node's allocatable cpu, memory,
// ephemeral storage or pod count was exceeded, or a pod was bound to a node
// it does not know. It also counts each pod's bindings (transitions from
// unbound to bound) and notes the revision of each.
type overcommitChecker struct {
	alloc    map[string]fit.Allocatable
	pods     map[string]podOnNode
	sums     map[string]fit.Resources
	counts   map[string]int
	node     map[string]string
	bindings map[string]int
	boundAt  map[string]events.Revision
	errs     []string
}

type podOnNode struct {
	node string
	req  fit.Resources
}

func newOvercommitChecker(nodes []*corev1.Node) *overcommitChecker {
	c := &overcommitChecker{alloc: map[string]fit.Allocatable{}, pods: map[string]podOnNode{}, sums: map[string]fit.Resources{}, counts: map[string]int{},
		node: map[string]string{}, bindings: map[string]int{}, boundAt: map[string]events.Revision{}}
	for _, n := range nodes {
		c.alloc[n.Name] = fit.NodeAllocatable(n.Status.Allocatable)
	}
	return c
}

func (c *overcommitChecker) apply(ev *events.Event) error {
	var pod corev1.Pod
	if err := json.Unmarshal(ev.Object, &pod); err != nil {
		return fmt.Errorf("decode %s/%s@%d: %w", ev.Namespace, ev.Name, ev.Revision, err)
	}
	key := ev.Namespace + "/" + ev.Name
	if ev.Type == events.Deleted {
		delete(c.node, key)
	} else {
		if c.node[key] == "" && pod.Spec.NodeName != "" {
			c.bindings[key]++
			c.boundAt[key] = ev.Revision
		}
		c.node[key] = pod.Spec.NodeName
	}
	if old, ok := c.pods[key]; ok {
		c.sums[old.node] = c.sums[old.node].Sub(old.req)
		c.counts[old.node]--
		delete(c.pods, key)
	}
	if ev.Type == events.Deleted || !counts(&pod) {
		return nil
	}
	req := fit.PodRequests(&pod, fit.Options{})
	node := pod.Spec.NodeName
	c.pods[key] = podOnNode{node: node, req: req}
	s := c.sums[node].Add(req)
	c.sums[node] = s
	c.counts[node]++
	a, known := c.alloc[node]
	if !known {
		c.errs = append(c.errs, fmt.Sprintf("revision %d: %s bound to unknown node %s", ev.Revision, key, node))
		return nil
	}
	if s.MilliCPU > a.MilliCPU || s.Memory > a.Memory || s.EphemeralStorage > a.EphemeralStorage || int64(c.counts[node]) > a.Pods {
		c.errs = append(c.errs, fmt.Sprintf("revision %d: node %s overcommitted by %s: %d/%dm cpu, %d/%d memory, %d/%d pods",
			ev.Revision, node, key, s.MilliCPU, a.MilliCPU, s.Memory, a.Memory, c.counts[node], a.Pods))
	}
	return nil
}

// replay applies every pod event of the log to a checker for nodes and
// fails the test at the first overcommitted revision (listing up to 20).
func replay(t testing.TB, env *controlplanetest.Env, nodes []*corev1.Node) *overcommitChecker {
	t.Helper()
	c := newOvercommitChecker(nodes)
	evs := podEvents(t, env)
	for _, ev := range evs {
		if err := c.apply(ev); err != nil {
			t.Fatal(err)
		}
	}
	if len(c.errs) > 0 {
		t.Fatalf("%d overcommitted revisions in %d pod events, e.g.:\n%s", len(c.errs), len(evs), strings.Join(c.errs[:min(len(c.errs), 20)], "\n"))
	}
	return c
}
