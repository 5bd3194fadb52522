package scheduler

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
)

// TestBindsWithCausation: a pod is bound to the node that fits, the
// binding's event names the pod's creation as its cause, and a Scheduled
// event says where it went.
func TestBindsWithCausation(t *testing.T) {
	env := controlplanetest.Start(t)
	createNodes(t, env, newNode("small", "1", "1Gi", 10), newNode("big", "8", "16Gi", 10))
	s := startReplica(t, env, Config{})
	controlplanetest.CreatePod(t, env, newPod("default", "web", "2", "1Gi"))
	eventually(t, wait, "pod bound", func() bool { return controlplanetest.GetPod(t, env, "default", "web").Spec.NodeName != "" })
	p := controlplanetest.GetPod(t, env, "default", "web")
	if p.Spec.NodeName != "big" {
		t.Fatalf("bound to %s, want big", p.Spec.NodeName)
	}
	if c := scheduledCondition(p); c == nil || c.Status != corev1.ConditionTrue {
		t.Fatalf("PodScheduled = %+v", c)
	}
	var created, bound *events.Event
	for _, ev := range podEvents(t, env) {
		if ev.Name != "web" {
			continue
		}
		if ev.Type == events.Added {
			created = ev
		}
		if bound == nil && ev.NodeName == "big" {
			bound = ev
		}
	}
	if created == nil || bound == nil {
		t.Fatalf("log: created %v, bound %v", created, bound)
	}
	if bound.CausationID != created.ID || bound.Actor.User != "system:kube-scheduler" {
		t.Fatalf("binding event: causation %q (want %q), actor %+v", bound.CausationID, created.ID, bound.Actor)
	}
	eventually(t, wait, "Scheduled event", func() bool {
		evs, err := env.Client.CoreV1().Events("default").List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs.Items {
			if e.Reason == ReasonScheduled && e.InvolvedObject.Name == "web" {
				return e.Message == "Successfully assigned default/web to big"
			}
		}
		return false
	})
	if st := s.Stats(); st.Scheduled != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// TestUnschedulableReason: a pod that fits nowhere gets kube's message in
// its PodScheduled condition and a FailedScheduling event, and is
// scheduled once a node that fits appears.
func TestUnschedulableReason(t *testing.T) {
	env := controlplanetest.Start(t)
	gpu := corev1.Taint{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}
	createNodes(t, env, newNode("small", "1", "1Gi", 10), newNode("gpu", "8", "16Gi", 10, gpu))
	startReplica(t, env, Config{})
	controlplanetest.CreatePod(t, env, newPod("default", "web", "2", "1Gi"))
	const want = "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint {dedicated: gpu}. " +
		"preemption: 0/2 nodes are available: 1 No preemption victims found for incoming pod, 1 Preemption is not helpful for scheduling."
	requireUnschedulable(t, env, "web", want)
	createNodes(t, env, newNode("new", "4", "4Gi", 10))
	eventually(t, wait, "pod bound after a node was added", func() bool { return controlplanetest.GetPod(t, env, "default", "web").Spec.NodeName == "new" })
}

// TestNoNodes: on a cluster without nodes a pod is unschedulable with
// kube's "no nodes available" message, and is scheduled once a node joins.
func TestNoNodes(t *testing.T) {
	env := controlplanetest.Start(t)
	startReplica(t, env, Config{})
	controlplanetest.CreatePod(t, env, newPod("default", "web", "1", "1Gi"))
	requireUnschedulable(t, env, "web", "no nodes available to schedule pods")
	createNodes(t, env, newNode("first", "4", "4Gi", 10))
	eventually(t, wait, "pod bound after the first node joined", func() bool {
		return controlplanetest.GetPod(t, env, "default", "web").Spec.NodeName == "first"
	})
}

// requireUnschedulable waits for pod name's PodScheduled=False condition
// and FailedScheduling event, and requires both to say want.
func requireUnschedulable(t *testing.T, env *controlplanetest.Env, name, want string) {
	t.Helper()
	eventually(t, wait, "Unschedulable condition", func() bool {
		c := scheduledCondition(controlplanetest.GetPod(t, env, "default", name))
		return c != nil && c.Status == corev1.ConditionFalse
	})
	c := scheduledCondition(controlplanetest.GetPod(t, env, "default", name))
	if c.Reason != ReasonUnschedulable || c.Message != want {
		t.Fatalf("condition %s: %q\nwant %q", c.Reason, c.Message, want)
	}
	eventually(t, wait, "FailedScheduling event", func() bool {
		evs, err := env.Client.CoreV1().Events("default").List(context.Background(),
			metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("reason", ReasonFailedScheduling).String()})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs.Items {
			if e.InvolvedObject.Name == name && e.Reason == ReasonFailedScheduling {
				return e.Message == want && e.Type == corev1.EventTypeWarning
			}
		}
		return false
	})
}

// TestPreemption: a high-priority pod (by PriorityClass) that fits nowhere
// evicts the low-priority pod, is nominated to its node, and is bound there
// once the victim is gone.
func TestPreemption(t *testing.T) {
	env := controlplanetest.Start(t)
	ctx := context.Background()
	createNodes(t, env, newNode("n1", "2", "4Gi", 10))
	for name, v := range map[string]int32{"low": 10, "high": 1000} {
		pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: v}
		if _, err := env.Client.SchedulingV1().PriorityClasses().Create(ctx, pc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	s := startReplica(t, env, Config{})
	low := newPod("default", "low", "2", "1Gi")
	low.Spec.PriorityClassName = "low"
	controlplanetest.CreatePod(t, env, low)
	eventually(t, wait, "low bound", func() bool { return controlplanetest.GetPod(t, env, "default", "low").Spec.NodeName == "n1" })
	high := newPod("default", "high", "2", "1Gi")
	high.Spec.PriorityClassName = "high"
	controlplanetest.CreatePod(t, env, high)
	eventually(t, wait, "victim terminating", func() bool { return controlplanetest.GetPod(t, env, "default", "low").DeletionTimestamp != nil })
	eventually(t, wait, "nominated", func() bool {
		return controlplanetest.GetPod(t, env, "default", "high").Status.NominatedNodeName == "n1"
	})
	if n := controlplanetest.GetPod(t, env, "default", "high").Spec.NodeName; n != "" {
		t.Fatalf("bound to %s while the victim still runs", n)
	}
	// No kubelet here: finish the victim's graceful deletion as one would.
	zero := int64(0)
	if err := env.Client.CoreV1().Pods("default").Delete(ctx, "low", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	eventually(t, wait, "high bound", func() bool { return controlplanetest.GetPod(t, env, "default", "high").Spec.NodeName == "n1" })
	if st := s.Stats(); st.Preemptions < 1 || st.Victims != 1 {
		t.Fatalf("stats %+v", st)
	}
	// A lower-priority pod arriving meanwhile must not have taken the room:
	// covered by the framework's nominated-pod tests.
}

// TestOtherSchedulerIgnored: pods for another scheduler are left alone.
func TestOtherSchedulerIgnored(t *testing.T) {
	env := controlplanetest.Start(t)
	createNodes(t, env, newNode("n1", "2", "4Gi", 10))
	startReplica(t, env, Config{})
	p := newPod("default", "theirs", "1", "1Gi")
	p.Spec.SchedulerName = "my-scheduler"
	controlplanetest.CreatePod(t, env, p)
	mine := controlplanetest.CreatePod(t, env, newPod("default", "mine", "1", "1Gi"))
	eventually(t, wait, "mine bound", func() bool { return controlplanetest.GetPod(t, env, "default", mine.Name).Spec.NodeName != "" })
	if got := controlplanetest.GetPod(t, env, "default", "theirs"); got.Spec.NodeName != "" || scheduledCondition(got) != nil {
		t.Fatalf("pod of another scheduler was touched: %+v", got.Status)
	}
	if !strings.HasPrefix(mine.Spec.SchedulerName, "default") {
		t.Fatalf("apiserver default schedulerName = %q", mine.Spec.SchedulerName)
	}
}

// TestEventsCorrelated: a pod that fails again for the same reason gets
// one FailedScheduling event whose count grows (a PATCH, as client-go's
// EventCorrelator does), not a second event.
func TestEventsCorrelated(t *testing.T) {
	env := controlplanetest.Start(t)
	ctx := context.Background()
	createNodes(t, env, newNode("small", "1", "1Gi", 10))
	startReplica(t, env, Config{InitialBackoff: 10 * time.Millisecond})
	controlplanetest.CreatePod(t, env, newPod("default", "web", "2", "1Gi"))
	failed := func() []corev1.Event {
		evs, err := env.Client.CoreV1().Events("default").List(ctx,
			metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("reason", ReasonFailedScheduling).String()})
		if err != nil {
			t.Fatal(err)
		}
		return evs.Items
	}
	eventually(t, wait, "FailedScheduling event", func() bool { return len(failed()) == 1 })
	// A change that could help (labels) makes the pod try again; the
	// outcome is the same.
	for i := range 3 {
		n, err := env.Client.CoreV1().Nodes().Get(ctx, "small", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n.Labels["round"] = fmt.Sprint(i)
		if _, err := env.Client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, wait, fmt.Sprintf("count %d", i+2), func() bool {
			evs := failed()
			return len(evs) == 1 && evs[0].Count == int32(i+2)
		})
	}
}

// TestEventsQueuedNotDropped: with events limited to a few per second, the
// Scheduled events of a burst of bindings wait in the queue (bindings do
// not wait for them) and are all written eventually, none dropped.
func TestEventsQueuedNotDropped(t *testing.T) {
	env := controlplanetest.Start(t)
	ctx := context.Background()
	createNodes(t, env, newNode("n1", "64", "64Gi", 110))
	s := startReplica(t, env, Config{EventQPS: 20, EventBurst: 1})
	const pods = 40
	for i := range pods {
		controlplanetest.CreatePod(t, env, newPod("default", fmt.Sprintf("p%d", i), "10m", "10Mi"))
	}
	eventually(t, wait, "all bound", func() bool { return s.Stats().Scheduled == pods })
	t.Logf("when the last pod was bound: %d of %d events written", s.Stats().EventsWritten, pods)
	eventually(t, wait, "every Scheduled event", func() bool {
		evs, err := env.Client.CoreV1().Events("default").List(ctx,
			metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("reason", ReasonScheduled).String()})
		if err != nil {
			t.Fatal(err)
		}
		return len(evs.Items) == pods
	})
	if st := s.Stats(); st.EventsDropped != 0 || st.EventsWritten != pods {
		t.Fatalf("stats %+v", st)
	}
}
