package nodelifecycle_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cairn-dev/cairn/events/consumer/consumertest"
	"github.com/cairn-dev/cairn/services/controllers/nodelifecycle"
	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
)

const grace = 2 * time.Second

// fakeKubelet stands in for a node's kubelet: it renews the node's Lease every
// 200 ms while alive, and reports Ready when it comes back.
type fakeKubelet struct {
	env   *controlplanetest.Env
	node  string
	alive atomic.Bool
}

func (k *fakeKubelet) run(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(200 * time.Millisecond):
			}
			if !k.alive.Load() {
				continue
			}
			leases := k.env.Client.CoordinationV1().Leases(nodelifecycle.LeaseNamespace)
			l, err := leases.Get(ctx, k.node, metav1.GetOptions{})
			if err != nil {
				continue
			}
			now := metav1.NewMicroTime(time.Now())
			l.Spec.RenewTime = &now
			_, _ = leases.Update(ctx, l, metav1.UpdateOptions{})
		}
	}()
}

func (k *fakeKubelet) postReady(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	n, err := k.env.Client.CoreV1().Nodes().Get(ctx, k.node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
		Message: "kubelet is posting ready status", LastHeartbeatTime: now, LastTransitionTime: now}}
	if _, err := k.env.Client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestNodeLifecycle(t *testing.T) {
	env := controlplanetest.Start(t)
	ctx := context.Background()
	m := consumertest.Manager(t, env, controlplanetest.ControllerToken, controlplanetest.Logger("NODELIFECYCLE_TEST_LOG"), nil)
	if _, err := nodelifecycle.New(m, nodelifecycle.Options{GracePeriod: grace}); err != nil {
		t.Fatal(err)
	}
	// Other taints of the node are kept.
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule}}}}
	if _, err := env.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Client.CoordinationV1().Leases(nodelifecycle.LeaseNamespace).Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Spec: coordinationv1.LeaseSpec{HolderIdentity: new("n1")}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	k := &fakeKubelet{env: env, node: "n1"}
	k.alive.Store(true)
	k.postReady(t)
	k.run(t)

	secs := func(s int64) *int64 { return &s }
	unreachable := func(s *int64) []corev1.Toleration {
		return []corev1.Toleration{{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: s}}
	}
	pods := map[string][]corev1.Toleration{
		"now":     unreachable(secs(0)),
		"later":   unreachable(secs(3)),
		"forever": unreachable(nil),
		"default": nil, // the apiserver's 300 s
	}
	for name, tols := range pods {
		p := controlplanetest.CreatePod(t, env, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec: corev1.PodSpec{NodeName: "n1", Tolerations: tols, Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}})
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		if _, err := env.Client.CoreV1().Pods("default").UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	controlplanetest.RunSynced(t, m)

	getNode := func() *corev1.Node {
		n, err := env.Client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	getPod := func(name string) *corev1.Pod { return controlplanetest.GetPod(t, env, "default", name) }

	t.Run("a node heard from stays Ready and untainted", func(t *testing.T) {
		time.Sleep(2 * grace)
		n := getNode()
		if r := readyOf(n); r == nil || r.Status != corev1.ConditionTrue || len(n.Spec.Taints) != 1 {
			t.Fatalf("live node: Ready %+v, taints %+v", r, n.Spec.Taints)
		}
	})

	t.Run("a silent node becomes Unknown and unreachable", func(t *testing.T) {
		k.alive.Store(false)
		controlplanetest.Eventually(t, 20*time.Second, "Ready Unknown", func() bool {
			r := readyOf(getNode())
			return r != nil && r.Status == corev1.ConditionUnknown
		})
		l, err := env.Client.CoordinationV1().Leases(nodelifecycle.LeaseNamespace).Get(ctx, "n1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if d := time.Since(l.Spec.RenewTime.Time); d < grace {
			t.Errorf("node marked Unknown %v after its last heartbeat, before the %v grace period", d, grace)
		}
		r := readyOf(getNode())
		if r.Reason != nodelifecycle.ReasonStatusUnknown || r.Message != nodelifecycle.MessageStatusUnknown {
			t.Errorf("Ready condition %+v", r)
		}
		controlplanetest.Eventually(t, 20*time.Second, "the unreachable taints", func() bool {
			return hasTaint(getNode(), corev1.TaintNodeUnreachable, corev1.TaintEffectNoExecute) &&
				hasTaint(getNode(), corev1.TaintNodeUnreachable, corev1.TaintEffectNoSchedule)
		})
		if !hasTaint(getNode(), "dedicated", corev1.TaintEffectNoSchedule) {
			t.Errorf("the node's own taint is gone: %+v", getNode().Spec.Taints)
		}
		ev := controlplanetest.WaitForEvent(t, env, "default", "n1", "NodeNotReady")
		if ev.Source.Component != nodelifecycle.Component || ev.Message != "Node n1 status is now: NodeNotReady" {
			t.Errorf("NodeNotReady event %+v", ev)
		}
		for _, name := range []string{"forever", "default"} {
			if c := podCondition(getPod(name), corev1.PodReady); c == nil || c.Status != corev1.ConditionFalse {
				t.Errorf("pod %s Ready condition %+v, want False", name, c)
			}
		}
	})

	t.Run("pods go as their tolerations allow", func(t *testing.T) {
		controlplanetest.Eventually(t, 20*time.Second, "pod now deleted", func() bool { return getPod("now").DeletionTimestamp != nil })
		p := getPod("now")
		if c := podCondition(p, corev1.DisruptionTarget); c == nil || c.Status != corev1.ConditionTrue || c.Reason != nodelifecycle.ReasonDeletionByTaints {
			t.Errorf("evicted pod's DisruptionTarget condition %+v", c)
		}
		controlplanetest.WaitForEvent(t, env, "default", "now", nodelifecycle.ReasonTaintEviction)
		taint := taintOf(getNode(), corev1.TaintNodeUnreachable, corev1.TaintEffectNoExecute)
		if taint == nil || taint.TimeAdded == nil {
			t.Fatalf("NoExecute taint without timeAdded: %+v", taint)
		}
		if getPod("later").DeletionTimestamp != nil && time.Since(taint.TimeAdded.Time) < 2*time.Second {
			t.Errorf("pod later deleted before its 3 s toleration ran out")
		}
		controlplanetest.Eventually(t, 20*time.Second, "pod later deleted", func() bool { return getPod("later").DeletionTimestamp != nil })
		if d := getPod("later").DeletionTimestamp.Sub(taint.TimeAdded.Time); d < 2*time.Second {
			t.Errorf("pod later deleted %v after the taint, within its 3 s toleration", d)
		}
		for _, name := range []string{"forever", "default"} {
			if p := getPod(name); p.DeletionTimestamp != nil {
				t.Errorf("pod %s deleted; it tolerates the taint (for ever, or 300 s)", name)
			}
		}
	})

	t.Run("a node heard from again loses the taints", func(t *testing.T) {
		k.alive.Store(true)
		k.postReady(t)
		controlplanetest.Eventually(t, 20*time.Second, "the unreachable taints to go", func() bool {
			n := getNode()
			return !hasTaint(n, corev1.TaintNodeUnreachable, corev1.TaintEffectNoExecute) &&
				!hasTaint(n, corev1.TaintNodeUnreachable, corev1.TaintEffectNoSchedule) && hasTaint(n, "dedicated", corev1.TaintEffectNoSchedule)
		})
		time.Sleep(2 * grace)
		if r := readyOf(getNode()); r == nil || r.Status != corev1.ConditionTrue {
			t.Errorf("node back: Ready %+v", r)
		}
		if p := getPod("default"); p.DeletionTimestamp != nil {
			t.Errorf("pod default deleted after the node came back")
		}
	})
}

func readyOf(n *corev1.Node) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == corev1.NodeReady {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

func taintOf(n *corev1.Node, key string, effect corev1.TaintEffect) *corev1.Taint {
	for i := range n.Spec.Taints {
		if n.Spec.Taints[i].Key == key && n.Spec.Taints[i].Effect == effect {
			return &n.Spec.Taints[i]
		}
	}
	return nil
}

func hasTaint(n *corev1.Node, key string, effect corev1.TaintEffect) bool {
	return taintOf(n, key, effect) != nil
}

func podCondition(p *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == t {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}
