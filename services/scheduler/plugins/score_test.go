package plugins

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"

	fw "github.com/cairn-dev/cairn/services/scheduler/framework"
)

func TestScorePlacements(t *testing.T) {
	zones := []*corev1.Node{
		mkNode("a1", "4", "8Gi", nLabels(zone, "a")), mkNode("a2", "4", "8Gi", nLabels(zone, "a")),
		mkNode("b1", "4", "8Gi", nLabels(zone, "b")),
	}
	web := func(name, node string) *corev1.Pod { return mkPod(name, pLabels("app", "web"), on(node)) }
	runPlacements(t, Default(), []placement{
		{name: "least allocated picks the emptier node",
			nodes:    []*corev1.Node{mkNode("busy", "4", "8Gi"), mkNode("idle", "4", "8Gi")},
			existing: []*corev1.Pod{mkPod("a", req("2", "4Gi"), on("busy"))},
			pod:      mkPod("p", req("1", "1Gi")), want: []string{"idle"}},
		{name: "least allocated prefers the bigger node",
			nodes: []*corev1.Node{mkNode("small", "2", "4Gi"), mkNode("big", "16", "32Gi")},
			pod:   mkPod("p", req("1", "1Gi")), want: []string{"big"}},
		{name: "balanced allocation evens cpu and memory",
			// Both nodes end up with the same free share on average (least
			// allocated ties), but on "even" cpu and memory are used alike.
			nodes: []*corev1.Node{mkNode("even", "4", "4Gi"), mkNode("skewed", "4", "4Gi")},
			existing: []*corev1.Pod{mkPod("x", req("1", "1Gi"), on("even")),
				mkPod("y", req("2", "0"), on("skewed"))},
			pod: mkPod("p", req("1", "1Gi")), want: []string{"even"}},
		{name: "preferred pod affinity", nodes: zones, existing: []*corev1.Pod{web("w", "b1")},
			pod: mkPod("p", preferPod(50, false, podTerm(zone, "app", "web"))), want: []string{"b1"}},
		{name: "preferred pod anti-affinity", nodes: zones, existing: []*corev1.Pod{web("w", "a1")},
			pod: mkPod("p", preferPod(50, true, podTerm(zone, "app", "web"))), want: []string{"b1"}},
		{name: "existing pod's preferred affinity attracts", nodes: zones,
			existing: []*corev1.Pod{mkPod("fan", on("b1"), preferPod(80, false, podTerm(corev1.LabelHostname, "app", "web")))},
			pod:      mkPod("p", pLabels("app", "web")), want: []string{"b1"}},
		{name: "existing pod's required affinity attracts (hard weight)", nodes: zones,
			existing: []*corev1.Pod{mkPod("fan", on("a2"), pLabels("app", "web"), podAffinity(podTerm(corev1.LabelHostname, "app", "web")))},
			pod:      mkPod("p", pLabels("app", "web")), want: []string{"a2"}},
		{name: "spread ScheduleAnyway by zone", nodes: zones, existing: []*corev1.Pod{web("w1", "a1"), web("w2", "a2")},
			pod: mkPod("p", pLabels("app", "web"), spread(1, zone, corev1.ScheduleAnyway, "app", "web")), want: []string{"b1"}},
		{name: "spread ScheduleAnyway by host", nodes: zones, existing: []*corev1.Pod{web("w1", "a1"), web("w2", "b1")},
			pod: mkPod("p", pLabels("app", "web"), spread(1, corev1.LabelHostname, corev1.ScheduleAnyway, "app", "web")), want: []string{"a2"}},
		{name: "image locality", nodes: []*corev1.Node{mkNode("cold", "4", "8Gi"), mkNode("warm", "4", "8Gi", nImage("registry/big:1", 900*mib))},
			pod: mkPod("p", image("registry/big:1")), want: []string{"warm"}},
		{name: "image locality normalises names", nodes: []*corev1.Node{mkNode("cold", "4", "8Gi"), mkNode("warm", "4", "8Gi", nImage("big:latest", 900*mib))},
			pod: mkPod("p", image("big")), want: []string{"warm"}},
		{name: "small image does not count", nodes: []*corev1.Node{mkNode("busy", "4", "8Gi", nImage("tiny:1", 1*mib)), mkNode("idle", "4", "8Gi")},
			existing: []*corev1.Pod{mkPod("a", req("1", "1Gi"), on("busy"))},
			pod:      mkPod("p", image("tiny:1")), want: []string{"idle"}},
	})
}

func TestCombinations(t *testing.T) {
	nodes := []*corev1.Node{
		mkNode("gpu-a", "8", "16Gi", nLabels(zone, "a", "accel", "gpu"), nTaint("dedicated", "gpu", corev1.TaintEffectNoSchedule)),
		mkNode("gpu-b", "8", "16Gi", nLabels(zone, "b", "accel", "gpu"), nTaint("dedicated", "gpu", corev1.TaintEffectNoSchedule)),
		mkNode("cpu-a", "4", "8Gi", nLabels(zone, "a")),
		mkNode("cpu-b", "4", "8Gi", nLabels(zone, "b")),
		mkNode("cordoned", "32", "64Gi", nLabels(zone, "c"), nUnschedulable()),
	}
	trainer := func(name, node string) *corev1.Pod {
		return mkPod(name, pLabels("app", "train"), req("4", "4Gi"), on(node), tolerate("dedicated", "gpu", corev1.TaintEffectNoSchedule))
	}
	runPlacements(t, Default(), []placement{
		{name: "gpu pod: toleration, selector, anti-affinity", nodes: nodes,
			existing: []*corev1.Pod{trainer("t1", "gpu-a")},
			pod: mkPod("p", pLabels("app", "train"), req("4", "4Gi"), nodeSelector("accel", "gpu"),
				tolerate("dedicated", "gpu", corev1.TaintEffectNoSchedule), podAntiAffinity(podTerm(zone, "app", "train"))),
			want: []string{"gpu-b"}},
		{name: "plain pod too big for cpu nodes", nodes: nodes, pod: mkPod("p", req("6", "1Gi")),
			wantMsg: "0/5 nodes are available: 1 node(s) were unschedulable, 2 Insufficient cpu, " +
				"2 node(s) had untolerated taint {dedicated: gpu}."},
		{name: "affinity to trainer but taint blocks its zone's gpu node and cpu node is full", nodes: nodes,
			existing: []*corev1.Pod{trainer("t1", "gpu-a"), mkPod("fill", req("4", "1Gi"), on("cpu-a"))},
			pod:      mkPod("p", req("1", "1Gi"), podAffinity(podTerm(zone, "app", "train"))),
			wantMsg: "0/5 nodes are available: 1 Insufficient cpu, 1 node(s) didn't match pod affinity rules, " +
				"1 node(s) were unschedulable, 2 node(s) had untolerated taint {dedicated: gpu}."},
		{name: "spread and preferred node affinity", nodes: nodes,
			existing: []*corev1.Pod{mkPod("w1", pLabels("app", "web"), on("cpu-b"))},
			pod: mkPod("p", pLabels("app", "web"), preferNode(100, zone, "b"),
				spread(1, zone, corev1.DoNotSchedule, "app", "web")),
			want: []string{"cpu-a"}},
		{name: "ports and resources", nodes: nodes[2:4],
			existing: []*corev1.Pod{mkPod("a", hostPort(443), on("cpu-a")), mkPod("b", req("4", "1Gi"), on("cpu-b"))},
			pod:      mkPod("p", req("1", "1Gi"), hostPort(443)),
			wantMsg:  "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) didn't have free ports for the requested pod ports."},
	})
}

// TestNormalizedScores checks raw scores through normalisation and weights
// on a case small enough to work out by hand.
func TestNormalizedScores(t *testing.T) {
	nodes := []*corev1.Node{mkNode("n1", "4", "4Gi"), mkNode("n2", "4", "4Gi")}
	existing := []*corev1.Pod{mkPod("a", req("2", "2Gi"), on("n1"))}
	f := fw.New([]fw.Plugin{NodeResourcesFit{}, BalancedAllocation{}}, map[string]int64{NodeResourcesFitName: 2}, fw.Options{Parallelism: 1})
	scores, err := f.ScoreNodes(context.Background(), fw.NewPodInfo(mkPod("p", req("1", "1Gi")), 0), fw.NewSnapshot(nodes, existing))
	if err != nil {
		t.Fatal(err)
	}
	// n1: cpu 3/4 used -> 25 free, memory 3/4 -> 25: least 25 * 2 + balanced 100 = 150.
	// n2: 1/4 -> 75, 75: 75 * 2 + 100 = 250.
	want := map[string]int64{"n1": 150, "n2": 250}
	for _, s := range scores {
		if want[s.Name] != s.Score {
			t.Errorf("%s scored %d, want %d", s.Name, s.Score, want[s.Name])
		}
	}
}
