package daemonset

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// TestShouldRun ports the table of kube's TestNodeShouldRunDaemonPod:
// whether a new pod goes on the node and whether a running one stays.
func TestShouldRun(t *testing.T) {
	node := func(opts ...nodeOpt) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"zone": "a"}}}
		for _, o := range opts {
			o(n)
		}
		return n
	}
	tests := []struct {
		name             string
		spec             func(*corev1.PodSpec)
		node             *corev1.Node
		wantRun, wantCon bool
	}{
		{"plain node", nil, node(), true, true},
		{"selector matches", func(s *corev1.PodSpec) { s.NodeSelector = map[string]string{"zone": "a"} }, node(), true, true},
		{"selector does not match", func(s *corev1.PodSpec) { s.NodeSelector = map[string]string{"zone": "b"} }, node(), false, false},
		{"other nodeName", func(s *corev1.PodSpec) { s.NodeName = "m" }, node(), false, false},
		{"own nodeName", func(s *corev1.PodSpec) { s.NodeName = "n" }, node(), true, true},
		{"untolerated NoSchedule", nil, node(withTaint("x", corev1.TaintEffectNoSchedule)), false, true},
		{"untolerated NoExecute", nil, node(withTaint("x", corev1.TaintEffectNoExecute)), false, false},
		{"PreferNoSchedule ignored", nil, node(withTaint("x", corev1.TaintEffectPreferNoSchedule)), true, true},
		{"tolerated NoExecute", func(s *corev1.PodSpec) {
			s.Tolerations = []corev1.Toleration{{Key: "x", Operator: corev1.TolerationOpEqual, Value: "", Effect: corev1.TaintEffectNoExecute}}
		}, node(withTaint("x", corev1.TaintEffectNoExecute)), true, true},
		{"not ready NoExecute", nil, node(withTaint(taintNotReady, corev1.TaintEffectNoExecute)), true, true},
		{"not ready NoSchedule", nil, node(withTaint(taintNotReady, corev1.TaintEffectNoSchedule)), false, true},
		{"unschedulable", nil, node(withTaint(taintUnschedulable, corev1.TaintEffectNoSchedule)), true, true},
		{"network unavailable", nil, node(withTaint(taintNetworkUnavailable, corev1.TaintEffectNoSchedule)), false, true},
		{"network unavailable, host network", func(s *corev1.PodSpec) { s.HostNetwork = true },
			node(withTaint(taintNetworkUnavailable, corev1.TaintEffectNoSchedule)), true, true},
		{"affinity matches", func(s *corev1.PodSpec) {
			s.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a", "b"}}}}}}}}
		}, node(), true, true},
		{"affinity does not match", func(s *corev1.PodSpec) {
			s.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"m"}}}}}}}}
		}, node(), false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ds := newDS("ns", "ds")
			if tt.spec != nil {
				tt.spec(&ds.Spec.Template.Spec)
			}
			p, err := newPlacement(ds)
			if err != nil {
				t.Fatal(err)
			}
			run, cont := p.shouldRun(tt.node)
			if run != tt.wantRun || cont != tt.wantCon {
				t.Errorf("shouldRun = %v, %v; want %v, %v", run, cont, tt.wantRun, tt.wantCon)
			}
		})
	}
}

// TestNodeAffinityFor ports kube's TestReplaceDaemonSetPodNodeNameNodeAffinity:
// the required terms become the one metadata.name term, preferred terms
// and pod affinity stay; targetNode reads it back.
func TestNodeAffinityFor(t *testing.T) {
	preferred := []corev1.PreferredSchedulingTerm{{Weight: 1, Preference: corev1.NodeSelectorTerm{
		MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpExists}}}}}
	tests := []struct {
		name string
		in   *corev1.Affinity
	}{
		{"nil", nil},
		{"no node affinity", &corev1.Affinity{PodAffinity: &corev1.PodAffinity{}}},
		{"required terms replaced", &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{
				{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}}},
				{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"x", "y"}}}},
			}},
			PreferredDuringSchedulingIgnoredDuringExecution: preferred}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var before string
			if tt.in != nil {
				before = tt.in.String()
			}
			out := nodeAffinityFor(tt.in, "node-1")
			terms := out.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
			if len(terms) != 1 || len(terms[0].MatchExpressions) != 0 || len(terms[0].MatchFields) != 1 {
				t.Fatalf("terms %+v", terms)
			}
			if f := terms[0].MatchFields[0]; f.Key != "metadata.name" || f.Operator != corev1.NodeSelectorOpIn || len(f.Values) != 1 || f.Values[0] != "node-1" {
				t.Errorf("field requirement %+v", f)
			}
			if tt.in != nil && tt.in.String() != before {
				t.Error("the template's affinity was modified")
			}
			if tt.in != nil && tt.in.PodAffinity != nil && out.PodAffinity == nil {
				t.Error("pod affinity dropped")
			}
			if tt.in != nil && tt.in.NodeAffinity != nil && len(out.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution) != 1 {
				t.Error("preferred terms dropped")
			}
			got, err := targetNode(&corev1.Pod{Spec: corev1.PodSpec{Affinity: out}})
			if err != nil || got != "node-1" {
				t.Errorf("targetNode = %q, %v", got, err)
			}
		})
	}
	if _, err := targetNode(&corev1.Pod{}); err == nil {
		t.Error("targetNode of a pod without affinity: no error")
	}
	if got, _ := targetNode(&corev1.Pod{Spec: corev1.PodSpec{NodeName: "bound", Affinity: nodeAffinityFor(nil, "other")}}); got != "bound" {
		t.Errorf("targetNode of a bound pod = %q", got)
	}
}

// TestLimits ports kube's TestGetUnavailableNumbers / SurgeCount cases:
// percentages round up, other strategies allow nothing.
func TestLimits(t *testing.T) {
	pct := func(s string) *intstr.IntOrString { v := intstr.FromString(s); return &v }
	n := func(i int32) *intstr.IntOrString { v := intstr.FromInt32(i); return &v }
	tests := []struct {
		name               string
		strategy           appsv1.DaemonSetUpdateStrategy
		desired            int
		wantUnavail, wantS int
	}{
		{"count", rolling(n(2), nil), 5, 2, 0},
		{"percent rounds up", rolling(pct("30%"), nil), 5, 2, 0},
		{"surge percent", rolling(n(0), pct("10%")), 5, 0, 1},
		{"on delete", appsv1.DaemonSetUpdateStrategy{Type: appsv1.OnDeleteDaemonSetStrategyType}, 5, 0, 0},
		{"no nodes", rolling(pct("50%"), nil), 0, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ds := newDS("ns", "ds")
			ds.Spec.UpdateStrategy = tt.strategy
			u, err := unavailableCount(ds, tt.desired)
			if err != nil || u != tt.wantUnavail {
				t.Errorf("unavailable = %d, %v; want %d", u, err, tt.wantUnavail)
			}
			s, err := surgeCount(ds, tt.desired)
			if err != nil || s != tt.wantS {
				t.Errorf("surge = %d, %v; want %d", s, err, tt.wantS)
			}
			if allowsSurge(ds) != (tt.wantS > 0 || tt.strategy.RollingUpdate != nil && tt.strategy.RollingUpdate.MaxSurge != nil) {
				t.Errorf("allowsSurge = %v", allowsSurge(ds))
			}
		})
	}
}

func rolling(unavail, surge *intstr.IntOrString) appsv1.DaemonSetUpdateStrategy {
	return appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType,
		RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: unavail, MaxSurge: surge}}
}

// TestAvailable: ready for minReadySeconds (kube's IsPodAvailable).
func TestAvailable(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ready := func(at time.Time) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(at)}}}}
	}
	tests := []struct {
		name string
		pod  *corev1.Pod
		min  int32
		want bool
	}{
		{"not ready", &corev1.Pod{}, 0, false},
		{"ready", ready(now), 0, true},
		{"ready long enough", ready(now.Add(-time.Minute)), 30, true},
		{"ready too recently", ready(now.Add(-10 * time.Second)), 30, false},
	}
	for _, tt := range tests {
		if got := available(tt.pod, tt.min, now); got != tt.want {
			t.Errorf("%s: available = %v, want %v", tt.name, got, tt.want)
		}
	}
}
