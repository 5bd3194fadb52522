package replicaset

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

var t0 = time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)

// pod builds a test pod; opts adjust it.
func pod(name string, opts ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), CreationTimestamp: metav1.NewTime(t0.Add(-time.Hour))},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func onNode(n string) func(*corev1.Pod) { return func(p *corev1.Pod) { p.Spec.NodeName = n } }
func phase(ph corev1.PodPhase) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Status.Phase = ph }
}
func readyAt(t time.Time) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(t)})
	}
}
func created(t time.Time) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.CreationTimestamp = metav1.NewTime(t) }
}
func cost(c string) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Annotations = map[string]string{PodDeletionCostAnnotation: c} }
}
func restarts(n int32) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Status.ContainerStatuses = []corev1.ContainerStatus{{RestartCount: n}} }
}

func names(pods []*corev1.Pod) string {
	var s []string
	for _, p := range pods {
		s = append(s, p.Name)
	}
	return strings.Join(s, " ")
}

func TestRankPods(t *testing.T) {
	ready := readyAt(t0.Add(-time.Hour))
	tests := []struct {
		name    string
		pods    []*corev1.Pod
		related []*corev1.Pod // nil: the pods themselves
		want    string        // least useful first
	}{
		{"unscheduled first", []*corev1.Pod{pod("a", onNode("n1"), ready), pod("b", ready), pod("c", onNode("n2"), phase(corev1.PodPending))}, nil, "b c a"},
		{"pending, unknown, running", []*corev1.Pod{pod("r", onNode("n")), pod("u", onNode("n"), phase(corev1.PodUnknown)), pod("p", onNode("n"), phase(corev1.PodPending))}, nil, "p u r"},
		{"not ready first", []*corev1.Pod{pod("ready", onNode("n"), ready), pod("unready", onNode("n"))}, nil, "unready ready"},
		{"deletion cost", []*corev1.Pod{pod("c10", onNode("n"), ready, cost("10")), pod("c-5", onNode("n"), ready, cost("-5")), pod("c0", onNode("n"), ready)}, nil, "c-5 c0 c10"},
		{"bad deletion cost is 0", []*corev1.Pod{pod("c1", onNode("n"), ready, cost("1")), pod("bad", onNode("n"), ready, cost("x"))}, nil, "bad c1"},
		{"doubled up on a node first",
			[]*corev1.Pod{pod("alone", onNode("n1"), ready), pod("crowded", onNode("n2"), ready)},
			[]*corev1.Pod{pod("alone", onNode("n1")), pod("crowded", onNode("n2")), pod("sib1", onNode("n2")), pod("sib2", onNode("n2"))},
			"crowded alone"},
		{"ready more recently first (log buckets)",
			[]*corev1.Pod{pod("old", onNode("n"), readyAt(t0.Add(-24*time.Hour))), pod("new", onNode("n"), readyAt(t0.Add(-time.Minute)))}, nil, "new old"},
		{"more restarts first", []*corev1.Pod{pod("r0", onNode("n"), ready), pod("r5", onNode("n"), ready, restarts(5))}, nil, "r5 r0"},
		{"newer first",
			[]*corev1.Pod{pod("old", onNode("n"), ready, created(t0.Add(-48*time.Hour))), pod("new", onNode("n"), ready, created(t0.Add(-time.Minute))), pod("mid", onNode("n"), ready, created(t0.Add(-2*time.Hour)))},
			nil, "new mid old"},
		{"same log bucket: by UID",
			[]*corev1.Pod{pod("b", onNode("n"), ready, created(t0.Add(-70*time.Second))), pod("a", onNode("n"), ready, created(t0.Add(-80*time.Second)))}, nil, "a b"},
		{"the scale-down of the integration test",
			[]*corev1.Pod{pod("rr1", readyAt(t0.Add(-time.Second))), pod("pend1", phase(corev1.PodPending), created(t0)), pod("run", created(t0.Add(-time.Second))), pod("rr2", readyAt(t0)), pod("pend2", phase(corev1.PodPending))},
			nil, "pend1 pend2 run rr2 rr1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rel := tt.related
			if rel == nil {
				rel = tt.pods
			}
			pods := append([]*corev1.Pod(nil), tt.pods...)
			rankPods(pods, rel, t0)
			if got := names(pods); got != tt.want {
				t.Errorf("rank = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestAvailable(t *testing.T) {
	tests := []struct {
		name      string
		pod       *corev1.Pod
		min       int32
		want      bool
		wantAfter time.Duration
	}{
		{"not ready", pod("p"), 0, false, 0},
		{"ready, no minReadySeconds", pod("p", readyAt(t0)), 0, true, 0},
		{"ready long enough", pod("p", readyAt(t0.Add(-10*time.Second))), 5, true, 0},
		{"ready too recently", pod("p", readyAt(t0.Add(-2*time.Second))), 5, false, 3*time.Second + time.Millisecond},
		{"no transition time", pod("p", readyAt(time.Time{})), 5, false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ok, after := available(tt.pod, tt.min, t0)
			if ok != tt.want || after != tt.wantAfter {
				t.Errorf("available = %v, %v; want %v, %v", ok, after, tt.want, tt.wantAfter)
			}
		})
	}
}
