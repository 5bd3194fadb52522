package kubelet

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
)

func TestRegisterNode(t *testing.T) {
	env := controlplanetest.Start(t)
	startHollow(t, env, "n1", func(c *Config) { c.Labels = map[string]string{"zone": "a"} })
	ctx := context.Background()
	var n *corev1.Node
	eventually(t, wait, "node registered", func() bool {
		var err error
		n, err = env.Client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
		return err == nil
	})
	checks := []struct {
		name string
		got  any
		want any
	}{
		{"hollow label", n.Labels[HollowLabel], "true"},
		{"hostname label", n.Labels[corev1.LabelHostname], "n1"},
		{"config label", n.Labels["zone"], "a"},
		{"internal ip", addr(n, corev1.NodeInternalIP), "10.1.0.1"},
		{"hostname address", addr(n, corev1.NodeHostName), "n1"},
		{"ready", nodeCond(n, corev1.NodeReady).Status, corev1.ConditionTrue},
		{"ready reason", nodeCond(n, corev1.NodeReady).Reason, "KubeletReady"},
		{"memory pressure", nodeCond(n, corev1.NodeMemoryPressure).Status, corev1.ConditionFalse},
		{"pods capacity", n.Status.Capacity.Pods().String(), "110"},
		{"cpu allocatable", n.Status.Allocatable.Cpu().String(), "4"},
		{"runtime", n.Status.NodeInfo.ContainerRuntimeVersion, "hollow://0.1.0"},
		{"kubelet version", n.Status.NodeInfo.KubeletVersion, Version},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, c.got, c.want)
		}
	}
}

func TestReregisterKeepsNode(t *testing.T) {
	env := controlplanetest.Start(t)
	ctx := context.Background()
	_, err := env.Client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name: "n1", Labels: map[string]string{"user": "x"}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	startHollow(t, env, "n1", nil)
	eventually(t, wait, "node status reported", func() bool {
		n, err := env.Client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
		return err == nil && nodeCond(n, corev1.NodeReady).Status == corev1.ConditionTrue &&
			n.Labels["user"] == "x" && n.Labels[HollowLabel] == "true"
	})
}

func TestNodeCapacityOverrides(t *testing.T) {
	env := controlplanetest.Start(t)
	startHollow(t, env, "n1", func(c *Config) {
		c.Capacity = corev1.ResourceList{corev1.ResourceCPU: resourceMust("64")}
		c.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resourceMust("60")}
	})
	eventually(t, wait, "node", func() bool {
		n, err := env.Client.CoreV1().Nodes().Get(context.Background(), "n1", metav1.GetOptions{})
		return err == nil && n.Status.Capacity.Cpu().String() == "64" && n.Status.Allocatable.Cpu().String() == "60" &&
			n.Status.Allocatable.Memory().String() == "16Gi"
	})
}

func TestLeaseRenewed(t *testing.T) {
	env := controlplanetest.Start(t)
	startHollow(t, env, "n1", nil)
	ctx := context.Background()
	var first time.Time
	eventually(t, wait, "lease created", func() bool {
		l, err := env.Client.CoordinationV1().Leases(LeaseNamespace).Get(ctx, "n1", metav1.GetOptions{})
		if err != nil || l.Spec.RenewTime == nil {
			return false
		}
		if ptr.Deref(l.Spec.HolderIdentity, "") != "n1" || ptr.Deref(l.Spec.LeaseDurationSeconds, 0) != 40 {
			t.Fatalf("lease spec: %+v", l.Spec)
		}
		if len(l.OwnerReferences) != 1 || l.OwnerReferences[0].Kind != "Node" {
			t.Fatalf("lease owner: %+v", l.OwnerReferences)
		}
		first = l.Spec.RenewTime.Time
		return true
	})
	eventually(t, wait, "lease renewed", func() bool {
		l, err := env.Client.CoordinationV1().Leases(LeaseNamespace).Get(ctx, "n1", metav1.GetOptions{})
		return err == nil && l.Spec.RenewTime.Time.After(first)
	})
}

func TestHollowPodLifecycle(t *testing.T) {
	env := controlplanetest.Start(t)
	_, rt := startHollow(t, env, "n1", nil)
	ctx := context.Background()
	created := controlplanetest.CreatePod(t, env, newPod("default", "p1", "n1"))
	var p *corev1.Pod
	eventually(t, wait, "pod running and ready", func() bool {
		p = controlplanetest.GetPod(t, env, "default", "p1")
		return p.Status.Phase == corev1.PodRunning && condition(p, corev1.PodReady) == corev1.ConditionTrue
	})
	cs := p.Status.ContainerStatuses
	if len(cs) != 1 || cs[0].State.Running == nil || !cs[0].Ready || !ptr.Deref(cs[0].Started, false) ||
		cs[0].ContainerID == "" || cs[0].ImageID == "" || cs[0].Image != "busybox" {
		t.Fatalf("container status: %s", describe(p))
	}
	if p.Status.PodIP == "" || p.Status.HostIP != "10.1.0.1" || p.Status.StartTime == nil || len(p.Status.PodIPs) != 1 {
		t.Fatalf("addresses: %+v", p.Status)
	}
	for _, c := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReadyToStartContainers} {
		if condition(p, c) != corev1.ConditionTrue {
			t.Errorf("condition %s: %s", c, describe(p))
		}
	}

	// The history: the first status write said ContainerCreating, and
	// every status write names the pod's creation as its cause.
	evs := podEvents(t, env, "p1")
	var added *events.Event
	var statuses []*corev1.Pod
	for _, ev := range evs {
		if ev.Type == events.Added {
			added = ev
			continue
		}
		var obj corev1.Pod
		if err := json.Unmarshal(ev.Object, &obj); err != nil {
			t.Fatal(err)
		}
		if ev.CausationID != added.ID || ev.CorrelationID != added.CorrelationID {
			t.Errorf("status write %d: causation %q correlation %q, want %q %q", ev.Revision, ev.CausationID, ev.CorrelationID, added.ID, added.CorrelationID)
		}
		statuses = append(statuses, &obj)
	}
	if len(statuses) < 2 {
		t.Fatalf("want at least 2 status writes, got %d", len(statuses))
	}
	firstCS := statuses[0].Status.ContainerStatuses
	if statuses[0].Status.Phase != corev1.PodPending || len(firstCS) != 1 || firstCS[0].State.Waiting == nil ||
		firstCS[0].State.Waiting.Reason != "ContainerCreating" {
		t.Errorf("first status: %s", describe(statuses[0]))
	}
	// Nothing is written while nothing changes.
	n := len(evs)
	time.Sleep(time.Second)
	if got := len(podEvents(t, env, "p1")); got != n {
		t.Errorf("%d events while nothing changed", got-n)
	}

	// Graceful delete: the kubelet stops the pod and deletes it for good.
	if err := env.Client.CoreV1().Pods("default").Delete(ctx, "p1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, wait, "pod deleted by the kubelet", func() bool {
		_, err := env.Client.CoreV1().Pods("default").Get(ctx, "p1", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	eventually(t, wait, "runtime empty", func() bool {
		ps, _ := rt.PodStatus(ctx, string(created.UID))
		return len(ps.Sandboxes) == 0 && len(ps.Containers) == 0
	})
	evs = podEvents(t, env, "p1")
	last := evs[len(evs)-1]
	if last.Type != events.Deleted {
		t.Fatalf("last event %s", last.Type)
	}
	var final corev1.Pod
	json.Unmarshal(evs[len(evs)-2].Object, &final)
	if final.Status.Phase != corev1.PodSucceeded || final.Status.ContainerStatuses[0].State.Terminated == nil {
		t.Errorf("final status before delete: %s", describe(&final))
	}
	// A hollow kubelet records no Events, about pods or its node.
	l, err := env.Client.CoreV1().Events("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range l.Items {
		if ev.Source.Component == Component {
			t.Errorf("hollow kubelet recorded %s %q about %s", ev.Reason, ev.Message, ev.InvolvedObject.Name)
		}
	}
}

func TestHollowForceDelete(t *testing.T) {
	env := controlplanetest.Start(t)
	_, rt := startHollow(t, env, "n1", nil)
	ctx := context.Background()
	created := controlplanetest.CreatePod(t, env, newPod("default", "p1", "n1"))
	eventually(t, wait, "running", func() bool { return controlplanetest.GetPod(t, env, "default", "p1").Status.Phase == corev1.PodRunning })
	if err := env.Client.CoreV1().Pods("default").Delete(ctx, "p1", metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))}); err != nil {
		t.Fatal(err)
	}
	eventually(t, wait, "runtime empty", func() bool {
		ps, _ := rt.PodStatus(ctx, string(created.UID))
		return len(ps.Sandboxes) == 0 && len(ps.Containers) == 0
	})
}

// TestTrafficIsOwnPodsOnly: a kubelet receives the events of its own pods,
// not those of the other 1,000 pods of the cluster.
func TestTrafficIsOwnPodsOnly(t *testing.T) {
	env := controlplanetest.Start(t)
	k, _ := startHollow(t, env, "mine", nil)
	const others, own = 1000, 10
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < others; i += 16 {
				p := newPod("default", "other-"+itoa(i), "node-"+itoa(i%50))
				if _, err := env.Client.CoreV1().Pods("default").Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for i := range own {
		controlplanetest.CreatePod(t, env, newPod("default", "own-"+itoa(i), "mine"))
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	eventually(t, wait, "own pods running", func() bool {
		n := 0
		for _, p := range k.Pods().List(nil) {
			if p.Status.Phase == corev1.PodRunning {
				n++
			}
		}
		return n == own
	})
	// Make sure the log holds every other pod, then read the counters.
	last := controlplanetest.GetPod(t, env, "default", "other-"+itoa(others-1))
	rev, _ := events.ParseRevision(last.ResourceVersion)
	wctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := events.WaitPublished(wctx, env.JS, rev); err != nil {
		t.Fatal(err)
	}
	if err := k.Pods().WaitForLog(wctx); err != nil {
		t.Fatal(err)
	}
	st := k.Pods().Stats()
	t.Logf("kubelet cache: %d events delivered for %d own pods while %d other pods were created", st.Delivered, own, others)
	if k.Pods().Len() != own {
		t.Errorf("cache holds %d pods, want %d", k.Pods().Len(), own)
	}
	// Each own pod: ADDED and a few status writes. Any leak of the others
	// would add at least 1,000.
	if st.Delivered > own*6 {
		t.Errorf("delivered %d events, want at most %d", st.Delivered, own*6)
	}
}

func podEvents(t *testing.T, env *controlplanetest.Env, name string) []*events.Event {
	t.Helper()
	controlplanetest.WaitForLog(t, env)
	var out []*events.Event
	err := events.Tail(context.Background(), env.JS, events.TailOptions{Resource: "pods", Namespace: "default", Name: name},
		func(ev *events.Event) error {
			out = append(out, ev)
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func addr(n *corev1.Node, t corev1.NodeAddressType) string {
	for _, a := range n.Status.Addresses {
		if a.Type == t {
			return a.Address
		}
	}
	return ""
}

func nodeCond(n *corev1.Node, t corev1.NodeConditionType) corev1.NodeCondition {
	for _, c := range n.Status.Conditions {
		if c.Type == t {
			return c
		}
	}
	return corev1.NodeCondition{}
}
