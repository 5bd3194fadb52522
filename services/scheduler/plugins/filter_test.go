package plugins

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

const zone = corev1.LabelTopologyZone

func TestNodeResourcesFit(t *testing.T) {
	three := []*corev1.Node{mkNode("n1", "2", "4Gi"), mkNode("n2", "4", "4Gi"), mkNode("n3", "4", "8Gi")}
	runPlacements(t, Default(), []placement{
		{name: "fits the only big enough node", nodes: three, pod: mkPod("p", req("3", "6Gi")), want: []string{"n3"}},
		{name: "cpu too big everywhere", nodes: three, pod: mkPod("p", req("5", "1Gi")),
			wantMsg: "0/3 nodes are available: 3 Insufficient cpu."},
		{name: "cpu and memory reasons both count", nodes: three, pod: mkPod("p", req("5", "16Gi")),
			wantMsg: "0/3 nodes are available: 3 Insufficient cpu, 3 Insufficient memory."},
		{name: "mixed reasons sort as strings", nodes: three, pod: mkPod("p", req("3", "9Gi")),
			wantMsg: "0/3 nodes are available: 1 Insufficient cpu, 3 Insufficient memory."},
		{name: "existing pods use the room", nodes: three,
			existing: []*corev1.Pod{mkPod("a", req("3", "1Gi"), on("n3")), mkPod("b", req("3", "1Gi"), on("n2"))},
			pod:      mkPod("p", req("2", "1Gi")), want: []string{"n1"}},
		{name: "init container max rule", nodes: []*corev1.Node{mkNode("n1", "2", "4Gi")},
			pod:     mkPod("p", req("1", "1Gi"), initReq("3", "1Gi")),
			wantMsg: "0/1 nodes are available: 1 Insufficient cpu."},
		{name: "init container smaller than containers", nodes: []*corev1.Node{mkNode("n1", "2", "4Gi")},
			pod: mkPod("p", req("2", "1Gi"), initReq("1", "1Gi")), want: []string{"n1"}},
		{name: "overhead counts", nodes: []*corev1.Node{mkNode("n1", "2", "4Gi")},
			pod:     mkPod("p", req("2", "1Gi"), overhead("100m")),
			wantMsg: "0/1 nodes are available: 1 Insufficient cpu."},
		{name: "ephemeral storage", nodes: []*corev1.Node{mkNode("n1", "2", "4Gi")},
			pod:     mkPod("p", req("1", "1Gi"), storage("200Gi")),
			wantMsg: "0/1 nodes are available: 1 Insufficient ephemeral-storage."},
		{name: "pod count", nodes: []*corev1.Node{mkNode("n1", "2", "4Gi", nPods("1"))},
			existing: []*corev1.Pod{mkPod("a", on("n1"))}, pod: mkPod("p"),
			wantMsg: "0/1 nodes are available: 1 Too many pods."},
		{name: "zero request fits a full node", nodes: []*corev1.Node{mkNode("n1", "1", "1Gi")},
			existing: []*corev1.Pod{mkPod("a", req("1", "1Gi"), on("n1"))}, pod: mkPod("p"), want: []string{"n1"}},
		// As kube-scheduler: a node whose allocatable lists no pods takes
		// none (the apiserver's binding check agrees: schemas/fit).
		{name: "no pods allocatable", nodes: []*corev1.Node{mkNode("n1", "2", "4Gi", nNoPods()), mkNode("n2", "2", "4Gi")},
			pod: mkPod("p"), want: []string{"n2"}},
		{name: "no pods allocatable anywhere", nodes: []*corev1.Node{mkNode("n1", "2", "4Gi", nNoPods())},
			pod: mkPod("p"), wantMsg: "0/1 nodes are available: 1 Too many pods."},
	})
}

func TestNodeNameUnschedulablePorts(t *testing.T) {
	nodes := []*corev1.Node{mkNode("n1", "4", "8Gi"), mkNode("n2", "4", "8Gi", nUnschedulable())}
	runPlacements(t, Default(), []placement{
		{name: "cordoned node skipped", nodes: nodes, pod: mkPod("p"), want: []string{"n1"}},
		{name: "all cordoned", nodes: []*corev1.Node{nodes[1]}, pod: mkPod("p"),
			wantMsg: "0/1 nodes are available: 1 node(s) were unschedulable."},
		{name: "cordon tolerated", nodes: []*corev1.Node{nodes[1]},
			pod: mkPod("p", tolerate(corev1.TaintNodeUnschedulable, "", corev1.TaintEffectNoSchedule)), want: []string{"n2"}},
		{name: "nodeName", nodes: nodes[:1], pod: mkPod("p", on("n9")),
			wantMsg: "0/1 nodes are available: 1 node(s) didn't match the requested node name."},
		{name: "host port taken", nodes: nodes[:1], existing: []*corev1.Pod{mkPod("a", hostPort(80), on("n1"))},
			pod: mkPod("p", hostPort(80)), wantMsg: "0/1 nodes are available: 1 node(s) didn't have free ports for the requested pod ports."},
		{name: "other host port free", nodes: nodes[:1], existing: []*corev1.Pod{mkPod("a", hostPort(80), on("n1"))},
			pod: mkPod("p", hostPort(81)), want: []string{"n1"}},
	})
}

func TestTaintToleration(t *testing.T) {
	nodes := []*corev1.Node{
		mkNode("gpu", "4", "8Gi", nTaint("dedicated", "gpu", corev1.TaintEffectNoSchedule)),
		mkNode("evict", "4", "8Gi", nTaint("maint", "", corev1.TaintEffectNoExecute)),
		mkNode("soft", "4", "8Gi", nTaint("cheap", "yes", corev1.TaintEffectPreferNoSchedule)),
	}
	runPlacements(t, Default(), []placement{
		{name: "only the soft-tainted node", nodes: nodes, pod: mkPod("p"), want: []string{"soft"}},
		{name: "untolerated taints", nodes: nodes[:2], pod: mkPod("p"),
			wantMsg: "0/2 nodes are available: 1 node(s) had untolerated taint {dedicated: gpu}, 1 node(s) had untolerated taint {maint: }."},
		{name: "equal toleration", nodes: nodes[:2], pod: mkPod("p", tolerate("dedicated", "gpu", corev1.TaintEffectNoSchedule)), want: []string{"gpu"}},
		{name: "wrong value", nodes: nodes[:1], pod: mkPod("p", tolerate("dedicated", "cpu", corev1.TaintEffectNoSchedule)),
			wantMsg: "0/1 nodes are available: 1 node(s) had untolerated taint {dedicated: gpu}."},
		{name: "exists toleration, any effect", nodes: nodes[1:2], pod: mkPod("p", tolerate("maint", "", "")), want: []string{"evict"}},
		{name: "NoSchedule toleration does not cover NoExecute", nodes: nodes[1:2],
			pod:     mkPod("p", tolerate("maint", "", corev1.TaintEffectNoSchedule)),
			wantMsg: "0/1 nodes are available: 1 node(s) had untolerated taint {maint: }."},
		{name: "PreferNoSchedule scores lower", nodes: []*corev1.Node{nodes[2], mkNode("plain", "4", "8Gi")},
			pod: mkPod("p"), want: []string{"plain"}},
		{name: "PreferNoSchedule tolerated ties", nodes: []*corev1.Node{nodes[2], mkNode("plain", "4", "8Gi")},
			pod: mkPod("p", tolerate("cheap", "yes", corev1.TaintEffectPreferNoSchedule)), want: []string{"plain", "soft"}},
	})
}

func TestNodeAffinity(t *testing.T) {
	nodes := []*corev1.Node{
		mkNode("a", "4", "8Gi", nLabels(zone, "z1", "disk", "ssd", "gen", "3")),
		mkNode("b", "4", "8Gi", nLabels(zone, "z2", "disk", "hdd", "gen", "5")),
		mkNode("c", "4", "8Gi", nLabels(zone, "z3")),
	}
	runPlacements(t, Default(), []placement{
		{name: "nodeSelector", nodes: nodes, pod: mkPod("p", nodeSelector("disk", "hdd")), want: []string{"b"}},
		{name: "nodeSelector no match", nodes: nodes, pod: mkPod("p", nodeSelector("disk", "nvme")),
			wantMsg: "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector."},
		{name: "required In", nodes: nodes, pod: mkPod("p", requireNode(zone, corev1.NodeSelectorOpIn, "z3")), want: []string{"c"}},
		{name: "required NotIn", nodes: nodes, pod: mkPod("p", requireNode(zone, corev1.NodeSelectorOpNotIn, "z1", "z2")), want: []string{"c"}},
		{name: "required DoesNotExist", nodes: nodes, pod: mkPod("p", requireNode("disk", corev1.NodeSelectorOpDoesNotExist)), want: []string{"c"}},
		{name: "required Gt", nodes: nodes, pod: mkPod("p", requireNode("gen", corev1.NodeSelectorOpGt, "4")), want: []string{"b"}},
		{name: "selector and affinity both apply", nodes: nodes,
			pod:     mkPod("p", nodeSelector("disk", "ssd"), requireNode(zone, corev1.NodeSelectorOpIn, "z2")),
			wantMsg: "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector."},
		{name: "preferred wins", nodes: nodes, pod: mkPod("p", preferNode(10, "disk", "hdd")), want: []string{"b"}},
		{name: "heavier preference wins", nodes: nodes,
			pod: mkPod("p", preferNode(10, "disk", "hdd"), preferNode(50, zone, "z3")), want: []string{"c"}},
	})
}

func TestInterPodAffinityFilter(t *testing.T) {
	nodes := []*corev1.Node{
		mkNode("a1", "4", "8Gi", nLabels(zone, "a")), mkNode("a2", "4", "8Gi", nLabels(zone, "a")),
		mkNode("b1", "4", "8Gi", nLabels(zone, "b")),
	}
	db := mkPod("db", pLabels("app", "db"), on("a1"))
	runPlacements(t, Default(), []placement{
		{name: "affinity to zone of db", nodes: nodes, existing: []*corev1.Pod{db},
			pod: mkPod("p", podAffinity(podTerm(zone, "app", "db"))), want: []string{"a1", "a2"}},
		{name: "affinity to host of db", nodes: nodes, existing: []*corev1.Pod{db},
			pod: mkPod("p", podAffinity(podTerm(corev1.LabelHostname, "app", "db"))), want: []string{"a1"}},
		{name: "affinity to nothing", nodes: nodes, existing: []*corev1.Pod{db},
			pod:     mkPod("p", podAffinity(podTerm(zone, "app", "cache"))),
			wantMsg: "0/3 nodes are available: 3 node(s) didn't match pod affinity rules."},
		{name: "first pod of a self-affine group", nodes: nodes,
			pod: mkPod("p", pLabels("app", "web"), podAffinity(podTerm(zone, "app", "web"))), want: []string{"a1", "a2", "b1"}},
		{name: "other namespace does not match", nodes: nodes,
			existing: []*corev1.Pod{func() *corev1.Pod { p := mkPod("db", pLabels("app", "db"), on("a1")); p.Namespace = "other"; return p }()},
			pod:      mkPod("p", podAffinity(podTerm(zone, "app", "db"))),
			wantMsg:  "0/3 nodes are available: 3 node(s) didn't match pod affinity rules."},
		{name: "anti-affinity by zone", nodes: nodes, existing: []*corev1.Pod{db},
			pod: mkPod("p", podAntiAffinity(podTerm(zone, "app", "db"))), want: []string{"b1"}},
		{name: "anti-affinity everywhere", nodes: nodes,
			existing: []*corev1.Pod{db, mkPod("db2", pLabels("app", "db"), on("b1"))},
			pod:      mkPod("p", podAntiAffinity(podTerm(zone, "app", "db"))),
			wantMsg:  "0/3 nodes are available: 3 node(s) didn't match pod anti-affinity rules."},
		{name: "existing pod's anti-affinity", nodes: nodes,
			existing: []*corev1.Pod{mkPod("loner", on("a1"), podAntiAffinity(podTerm(zone, "app", "web")))},
			pod:      mkPod("p", pLabels("app", "web")), want: []string{"b1"}},
		{name: "existing anti-affinity message", nodes: nodes[:2],
			existing: []*corev1.Pod{mkPod("loner", on("a1"), podAntiAffinity(podTerm(zone, "app", "web")))},
			pod:      mkPod("p", pLabels("app", "web")),
			wantMsg:  "0/2 nodes are available: 2 node(s) didn't satisfy existing pods anti-affinity rules."},
		{name: "node without the topology key", nodes: []*corev1.Node{mkNode("bare", "4", "8Gi")}, existing: nil,
			pod:     mkPod("p", podAffinity(podTerm(zone, "app", "db")), pLabels("app", "db")),
			wantMsg: "0/1 nodes are available: 1 node(s) didn't match pod affinity rules."},
	})
}

func TestPodTopologySpreadFilter(t *testing.T) {
	nodes := []*corev1.Node{
		mkNode("a1", "4", "8Gi", nLabels(zone, "a")), mkNode("a2", "4", "8Gi", nLabels(zone, "a")),
		mkNode("b1", "4", "8Gi", nLabels(zone, "b")),
	}
	web := func(name, node string) *corev1.Pod { return mkPod(name, pLabels("app", "web"), on(node)) }
	newWeb := func(skew int32) *corev1.Pod {
		return mkPod("p", pLabels("app", "web"), spread(skew, zone, corev1.DoNotSchedule, "app", "web"))
	}
	runPlacements(t, Default(), []placement{
		{name: "goes to the emptier zone", nodes: nodes, existing: []*corev1.Pod{web("w1", "a1")}, pod: newWeb(1), want: []string{"b1"}},
		{name: "skew 2 allows either", nodes: nodes, existing: []*corev1.Pod{web("w1", "a1")}, pod: newWeb(2), want: []string{"a1", "a2", "b1"}},
		{name: "skew violated everywhere but the smallest zone is full", nodes: nodes,
			existing: []*corev1.Pod{web("w1", "a1"), mkPod("big", req("4", "1Gi"), on("b1"))},
			pod:      mkPod("p", pLabels("app", "web"), req("1", "1Gi"), spread(1, zone, corev1.DoNotSchedule, "app", "web")),
			wantMsg:  "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) didn't match pod topology spread constraints."},
		{name: "missing topology label", nodes: []*corev1.Node{mkNode("bare", "4", "8Gi"), nodes[0], nodes[2]},
			existing: []*corev1.Pod{web("w1", "a1"), web("w2", "a1"), mkPod("big", req("4", "1Gi"), on("b1"))},
			pod:      mkPod("p", pLabels("app", "web"), req("1", "1Gi"), spread(1, zone, corev1.DoNotSchedule, "app", "web")),
			wantMsg: "0/3 nodes are available: 1 Insufficient cpu, 1 node(s) didn't match pod topology spread constraints, " +
				"1 node(s) didn't match pod topology spread constraints (missing required label)."},
		{name: "per host spread", nodes: nodes, existing: []*corev1.Pod{web("w1", "a1"), web("w2", "b1")},
			pod: mkPod("p", pLabels("app", "web"), spread(1, corev1.LabelHostname, corev1.DoNotSchedule, "app", "web")), want: []string{"a2"}},
		{name: "domains limited by node affinity", nodes: nodes, existing: []*corev1.Pod{web("w1", "a1")},
			pod:  mkPod("p", pLabels("app", "web"), requireNode(zone, corev1.NodeSelectorOpIn, "a"), spread(1, zone, corev1.DoNotSchedule, "app", "web")),
			want: []string{"a1", "a2"}},
	})
}
