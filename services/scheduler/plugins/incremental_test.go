package plugins

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fw "github.com/cairn-dev/cairn/services/scheduler/framework"
)

// cluster is the state a snapshot should reflect.
type cluster struct {
	nodes map[string]*corev1.Node
	pods  map[string]*corev1.Pod
}

func (c *cluster) rebuild() *fw.Snapshot {
	nodes := slices.Collect(maps.Values(c.nodes))
	slices.SortFunc(nodes, func(a, b *corev1.Node) int { return compareStrings(a.Name, b.Name) })
	return fw.NewSnapshot(nodes, slices.Collect(maps.Values(c.pods)))
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// outcome is what the default plugins say of pod on snap: the weighted
// score of every feasible node, or the FitError message; and the feasible
// nodes.
func outcome(t *testing.T, snap *fw.Snapshot, pod *corev1.Pod) (string, []string) {
	t.Helper()
	f := NewDefaultFramework(fw.Options{Parallelism: 1, PercentageOfNodesToScore: 100, Seed: 1})
	pi := fw.NewPodInfo(pod, 0)
	_, err := f.Schedule(context.Background(), pi, snap)
	var fe *fw.FitError
	if errors.As(err, &fe) {
		return fe.Error(), nil
	}
	if err != nil {
		t.Fatal(err)
	}
	scores, err := f.ScoreNodes(context.Background(), pi, snap)
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(scores, func(a, b fw.NodeScore) int { return compareStrings(a.Name, b.Name) })
	var names []string
	for _, s := range scores {
		names = append(names, s.Name)
	}
	return fmt.Sprint(scores), names
}

// TestIncrementalMatchesRebuilt drives one snapshot through pod adds,
// updates (labels changed) and removals, node label changes and node
// removal, as the scheduler's cache does, and checks after every step that
// inter-pod affinity and topology spread (filter, score and messages)
// decide for a set of probe pods exactly as on a snapshot built from
// scratch, and that some decisions move as they must.
func TestIncrementalMatchesRebuilt(t *testing.T) {
	probes := map[string]*corev1.Pod{
		"anti-host":     mkPod("p", pLabels("app", "web"), podAntiAffinity(podTerm(corev1.LabelHostname, "app", "web"))),
		"anti-zone":     mkPod("p", podAntiAffinity(podTerm(zone, "app", "db"))),
		"affinity-zone": mkPod("p", podAffinity(podTerm(zone, "app", "db"))),
		"target":        mkPod("p", pLabels("app", "target")),
		"spread-zone":   mkPod("p", pLabels("app", "web"), spread(1, zone, corev1.DoNotSchedule, "app", "web")),
		"spread-host":   mkPod("p", pLabels("app", "web"), spread(1, corev1.LabelHostname, corev1.DoNotSchedule, "app", "web")),
		"spread-soft":   mkPod("p", pLabels("app", "web"), spread(1, zone, corev1.ScheduleAnyway, "app", "web")),
		"spread-pinned": mkPod("p", pLabels("app", "web"), requireNode(zone, corev1.NodeSelectorOpIn, "a", "b"), spread(1, zone, corev1.DoNotSchedule, "app", "web")),
		"prefer":        mkPod("p", preferPod(60, false, podTerm(zone, "app", "db")), preferPod(30, true, podTerm(corev1.LabelHostname, "app", "web"))),
	}
	c := &cluster{nodes: map[string]*corev1.Node{}, pods: map[string]*corev1.Pod{}}
	snap := fw.NewSnapshot(nil, nil)
	setNode := func(n *corev1.Node) { c.nodes[n.Name] = n; snap.AddNode(n) }
	setPod := func(p *corev1.Pod) {
		key := p.Namespace + "/" + p.Name
		if old, ok := c.pods[key]; ok {
			snap.RemovePod(key, old.Spec.NodeName)
		}
		c.pods[key] = p
		snap.AddPod(fw.NewPodInfo(p, 0), p.Spec.NodeName)
	}
	removePod := func(name string) {
		key := "default/" + name
		snap.RemovePod(key, c.pods[key].Spec.NodeName)
		delete(c.pods, key)
	}
	for _, n := range []*corev1.Node{mkNode("a1", "4", "8Gi", nLabels(zone, "a")), mkNode("a2", "4", "8Gi", nLabels(zone, "a")),
		mkNode("b1", "4", "8Gi", nLabels(zone, "b")), mkNode("c1", "4", "8Gi", nLabels(zone, "c"))} {
		setNode(n)
	}
	type expect struct {
		probe    string
		feasible []string
	}
	steps := []struct {
		name   string
		change func()
		want   []expect
	}{
		{"empty cluster", func() {}, nil},
		{"pods added", func() {
			setPod(mkPod("w1", pLabels("app", "web"), on("a1")))
			setPod(mkPod("w2", pLabels("app", "web"), on("b1")))
			setPod(mkPod("d1", pLabels("app", "db"), on("a2")))
			setPod(mkPod("loner", on("c1"), podAntiAffinity(podTerm(zone, "app", "target"))))
		}, []expect{{"spread-zone", []string{"c1"}}, {"anti-zone", []string{"b1", "c1"}},
			{"affinity-zone", []string{"a1", "a2"}}, {"target", []string{"a1", "a2", "b1"}}}},
		{"pod relabelled web -> db", func() { setPod(mkPod("w2", pLabels("app", "db"), on("b1"))) },
			[]expect{{"anti-zone", []string{"c1"}}, {"affinity-zone", []string{"a1", "a2", "b1"}}}},
		{"pod added where the node is unknown", func() { setPod(mkPod("w3", pLabels("app", "web"), on("d1"))) },
			[]expect{{"spread-zone", []string{"b1", "c1"}}}},
		{"node appears", func() { setNode(mkNode("d1", "4", "8Gi", nLabels(zone, "d"))) },
			[]expect{{"spread-zone", []string{"b1", "c1"}}, {"spread-host", []string{"a2", "b1", "c1"}}}},
		{"pod removed", func() { removePod("d1") }, []expect{{"anti-zone", []string{"a1", "a2", "c1", "d1"}}}},
		{"node moves to another zone", func() { setNode(mkNode("c1", "4", "8Gi", nLabels(zone, "a"))) },
			[]expect{{"target", []string{"b1", "d1"}}, {"spread-zone", []string{"b1"}}}},
		{"node loses its zone label", func() { setNode(mkNode("b1", "4", "8Gi")) }, nil},
		{"node removed", func() { delete(c.nodes, "a1"); snap.RemoveNode("a1") }, nil},
		{"terminating pod", func() {
			p := mkPod("w4", pLabels("app", "web"), on("c1"))
			now := metav1.Now()
			p.DeletionTimestamp = &now
			setPod(p)
		}, nil},
	}
	for _, st := range steps {
		st.change()
		fresh := c.rebuild()
		feasible := map[string][]string{}
		for name, probe := range probes {
			inc, nodes := outcome(t, snap, probe)
			if want, _ := outcome(t, fresh, probe); inc != want {
				t.Errorf("%s: probe %s:\nincremental %s\n    rebuilt %s", st.name, name, inc, want)
			}
			feasible[name] = nodes
		}
		for _, e := range st.want {
			if got := feasible[e.probe]; !slices.Equal(got, e.feasible) {
				t.Errorf("%s: probe %s fits %v, want %v", st.name, e.probe, got, e.feasible)
			}
		}
	}
}
