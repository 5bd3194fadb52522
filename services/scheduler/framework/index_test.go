package framework

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func labelled(ns, name, node string, kv ...string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{}}}
	p.Spec.NodeName = node
	for i := 0; i+1 < len(kv); i += 2 {
		p.Labels[kv[i]] = kv[i+1]
	}
	return p
}

func zoned(name, zone string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}}}
	if zone != "" {
		n.Labels[corev1.LabelTopologyZone] = zone
	}
	return n
}

func mustTerm(t *testing.T, owner *corev1.Pod, term corev1.PodAffinityTerm) *AffinityTerm {
	t.Helper()
	at, err := newAffinityTerm(owner, &term)
	if err != nil {
		t.Fatal(err)
	}
	return &at
}

// matching lists "node/ns/pod" for every pod EachPodMatching yields.
func matching(s *Snapshot, t *AffinityTerm) []string {
	var out []string
	s.EachPodMatching(t, func(ni *NodeInfo, pi *PodInfo) { out = append(out, ni.Name()+"/"+pi.Key) })
	slices.Sort(out)
	return out
}

// TestEachPodMatching: the label index finds the pods each kind of selector
// selects, follows adds, removals and label updates, and leaves out pods
// on nodes that are gone.
func TestEachPodMatching(t *testing.T) {
	owner := labelled("a", "owner", "")
	s := NewSnapshot([]*corev1.Node{zoned("n1", "z1"), zoned("n2", "z2")}, []*corev1.Pod{
		labelled("a", "web1", "n1", "app", "web", "tier", "fe"),
		labelled("a", "web2", "n2", "app", "web"),
		labelled("a", "db1", "n2", "app", "db"),
		labelled("b", "web3", "n1", "app", "web"),
		labelled("a", "bare", "n1"),
	})
	sel := func(ml map[string]string, exprs ...metav1.LabelSelectorRequirement) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: ml, MatchExpressions: exprs}
	}
	tests := []struct {
		name string
		term corev1.PodAffinityTerm
		want []string
	}{
		{"matchLabels, own namespace", corev1.PodAffinityTerm{LabelSelector: sel(map[string]string{"app": "web"})},
			[]string{"n1/a/web1", "n2/a/web2"}},
		{"two labels", corev1.PodAffinityTerm{LabelSelector: sel(map[string]string{"app": "web", "tier": "fe"})},
			[]string{"n1/a/web1"}},
		{"in", corev1.PodAffinityTerm{LabelSelector: sel(nil, metav1.LabelSelectorRequirement{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"web", "db"}})},
			[]string{"n1/a/web1", "n2/a/db1", "n2/a/web2"}},
		{"notin walks the namespace", corev1.PodAffinityTerm{LabelSelector: sel(nil, metav1.LabelSelectorRequirement{Key: "app", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"web"}})},
			[]string{"n1/a/bare", "n2/a/db1"}},
		{"exists", corev1.PodAffinityTerm{LabelSelector: sel(nil, metav1.LabelSelectorRequirement{Key: "tier", Operator: metav1.LabelSelectorOpExists})},
			[]string{"n1/a/web1"}},
		{"empty selector selects the namespace", corev1.PodAffinityTerm{LabelSelector: sel(nil)},
			[]string{"n1/a/bare", "n1/a/web1", "n2/a/db1", "n2/a/web2"}},
		{"nil selector selects nothing", corev1.PodAffinityTerm{}, nil},
		{"listed namespaces", corev1.PodAffinityTerm{Namespaces: []string{"b"}, LabelSelector: sel(map[string]string{"app": "web"})},
			[]string{"n1/b/web3"}},
		{"every namespace", corev1.PodAffinityTerm{NamespaceSelector: &metav1.LabelSelector{}, LabelSelector: sel(map[string]string{"app": "web"})},
			[]string{"n1/a/web1", "n1/b/web3", "n2/a/web2"}},
	}
	for _, tc := range tests {
		if got := matching(s, mustTerm(t, owner, tc.term)); !slices.Equal(got, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
	web := mustTerm(t, owner, corev1.PodAffinityTerm{LabelSelector: sel(map[string]string{"app": "web"})})
	// Update: web2 becomes a db pod (the cache removes the old and adds the new).
	s.RemovePod("a/web2", "n2")
	s.AddPod(NewPodInfo(labelled("a", "web2", "n2", "app", "db"), 0), "n2")
	s.AddPod(NewPodInfo(labelled("a", "web4", "n3", "app", "web"), 0), "n3") // node not known yet
	if got, want := matching(s, web), []string{"n1/a/web1"}; !slices.Equal(got, want) {
		t.Errorf("after update: got %v, want %v", got, want)
	}
	s.AddNode(zoned("n3", "z1"))
	s.RemoveNode("n1")
	if got, want := matching(s, web), []string{"n3/a/web4"}; !slices.Equal(got, want) {
		t.Errorf("after node changes: got %v, want %v", got, want)
	}
	s.RemovePod("a/web1", "n1")
	s.RemovePod("b/web3", "n1")
	s.RemovePod("a/bare", "n1")
	s.AddNode(zoned("n1", "z1"))
	if got, want := matching(s, web), []string{"n3/a/web4"}; !slices.Equal(got, want) {
		t.Errorf("after emptying n1: got %v, want %v", got, want)
	}
	if len(s.pods.byLabel[labelKey{"a", "app", "web"}]) != 1 || s.pods.byLabel[labelKey{"b", "app", "web"}] != nil {
		t.Errorf("index keeps stale entries: %v", s.pods.byLabel)
	}
}

// domains maps the values of key to the number of nodes with them, from
// the snapshot's interned ids.
func domains(s *Snapshot, key string) map[string]int {
	out := map[string]int{}
	k, ok := s.TopologyKey(key)
	if !ok {
		return out
	}
	for name, v := range s.topo.values[k] {
		if n := s.TopologyDomains(k)[v]; n > 0 {
			out[name] = int(n)
		}
	}
	return out
}

// TestTopologyIDs: interned node labels follow node adds, label changes
// and removals; every node's ids name its labels; ids of values no node
// carries any more are reclaimed once they outnumber the live ones.
func TestTopologyIDs(t *testing.T) {
	s := NewSnapshot([]*corev1.Node{zoned("n1", "z1"), zoned("n2", "z1"), zoned("n3", "z2"), zoned("bare", "")}, nil)
	check := func(step string, want map[string]int) {
		t.Helper()
		if got := domains(s, corev1.LabelTopologyZone); !maps.Equal(got, want) {
			t.Fatalf("%s: %v, want %v", step, got, want)
		}
		for _, ni := range s.Nodes {
			if got := s.topologyOf(ni.Node); !maps.Equal(got, ni.Node.Labels) {
				t.Fatalf("%s: node %s interned as %v, labels %v", step, ni.Name(), got, ni.Node.Labels)
			}
		}
	}
	check("initial", map[string]int{"z1": 2, "z2": 1})
	if k, _ := s.TopologyKey(corev1.LabelTopologyZone); s.NodeInfo("bare").TopologyValue(k) != -1 {
		t.Fatal("a node without the label has a value")
	}
	if _, ok := s.TopologyKey("unknown"); ok {
		t.Fatal("a key no node has has an id")
	}
	s.AddNode(zoned("n2", "z3"))
	check("relabel", map[string]int{"z1": 1, "z2": 1, "z3": 1})
	s.RemoveNode("n3")
	check("remove", map[string]int{"z1": 1, "z3": 1})
	s.AddNode(zoned("bare", "z1"))
	check("label added", map[string]int{"z1": 2, "z3": 1})
	// Node churn: hostnames come and go.
	for round := range 3 {
		for i := range 1500 {
			s.AddNode(zoned(fmt.Sprintf("tmp-%d-%d", round, i), "z9"))
		}
		for i := range 1500 {
			s.RemoveNode(fmt.Sprintf("tmp-%d-%d", round, i))
		}
	}
	check("after churn", map[string]int{"z1": 2, "z3": 1})
	host, _ := s.TopologyKey(corev1.LabelHostname)
	if n := len(s.TopologyDomains(host)); n > 1500+3 {
		t.Fatalf("%d hostname ids kept for 3 nodes: dead ids not reclaimed", n)
	}
	s.RemoveNode("n1")
	s.RemoveNode("n2")
	s.RemoveNode("bare")
	check("empty", map[string]int{})
}

// randomTerm is a term of one of the shapes the index treats differently.
func randomTerm(rnd *rand.Rand) corev1.PodAffinityTerm {
	vals := []string{"x", "y", "z"}
	keys := []string{"app", "tier"}
	t := corev1.PodAffinityTerm{TopologyKey: []string{corev1.LabelHostname, corev1.LabelTopologyZone}[rnd.IntN(2)]}
	k, v := keys[rnd.IntN(2)], vals[rnd.IntN(3)]
	switch rnd.IntN(7) {
	case 0:
		t.LabelSelector = &metav1.LabelSelector{MatchLabels: map[string]string{k: v}}
	case 1:
		t.LabelSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": v, "tier": vals[rnd.IntN(3)]}}
	case 2:
		t.LabelSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: k, Operator: metav1.LabelSelectorOpIn, Values: []string{v, vals[rnd.IntN(3)]}}}}
	case 3:
		t.LabelSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: k, Operator: metav1.LabelSelectorOpNotIn, Values: []string{v}}}}
	case 4:
		t.LabelSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: k, Operator: metav1.LabelSelectorOpExists}}}
	case 5:
		t.LabelSelector = &metav1.LabelSelector{}
	}
	switch rnd.IntN(4) {
	case 0:
		t.Namespaces = []string{"a", "b"}
	case 1:
		t.NamespaceSelector = &metav1.LabelSelector{}
	}
	return t
}

func randomPod(rnd *rand.Rand, name, node string) *corev1.Pod {
	ns := []string{"a", "b"}[rnd.IntN(2)]
	p := labelled(ns, name, node)
	for _, k := range []string{"app", "tier"} {
		if rnd.IntN(3) > 0 {
			p.Labels[k] = []string{"x", "y", "z"}[rnd.IntN(3)]
		}
	}
	terms := func() []corev1.PodAffinityTerm {
		var out []corev1.PodAffinityTerm
		for range rnd.IntN(3) {
			out = append(out, randomTerm(rnd))
		}
		return out
	}
	weighted := func() []corev1.WeightedPodAffinityTerm {
		var out []corev1.WeightedPodAffinityTerm
		for _, t := range terms() {
			out = append(out, corev1.WeightedPodAffinityTerm{Weight: int32(1 + rnd.IntN(100)), PodAffinityTerm: t})
		}
		return out
	}
	if rnd.IntN(2) == 0 {
		p.Spec.Affinity = &corev1.Affinity{
			PodAffinity:     &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: terms(), PreferredDuringSchedulingIgnoredDuringExecution: weighted()},
			PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: terms(), PreferredDuringSchedulingIgnoredDuringExecution: weighted()},
		}
	}
	return p
}

// bruteTerms lists the placed terms selecting pod by walking every pod.
func bruteTerms(s *Snapshot, pod *corev1.Pod, anti bool) []string {
	var out []string
	add := func(ni *NodeInfo, pi *PodInfo, kind string, t *AffinityTerm, w int32) {
		if t.Matches(pod) {
			out = append(out, fmt.Sprintf("%s/%s/%s/%p/%d", ni.Name(), pi.Key, kind, t, w))
		}
	}
	for _, ni := range s.Nodes {
		for _, pi := range ni.Pods {
			if anti {
				for i := range pi.RequiredAntiAffinity {
					add(ni, pi, "ra", &pi.RequiredAntiAffinity[i], 0)
				}
				continue
			}
			for i := range pi.RequiredAffinity {
				add(ni, pi, "r", &pi.RequiredAffinity[i], 0)
			}
			for i := range pi.PreferredAffinity {
				add(ni, pi, "p", &pi.PreferredAffinity[i].AffinityTerm, pi.PreferredAffinity[i].Weight)
			}
			for i := range pi.PreferredAntiAffinity {
				add(ni, pi, "pa", &pi.PreferredAntiAffinity[i].AffinityTerm, pi.PreferredAntiAffinity[i].Weight)
			}
		}
	}
	slices.Sort(out)
	return out
}

func indexedTerms(s *Snapshot, pod *corev1.Pod, anti bool) []string {
	kinds := map[TermKind]string{RequiredAntiAffinity: "ra", RequiredAffinity: "r", PreferredAffinity: "p", PreferredAntiAffinity: "pa"}
	var out []string
	fn := func(pt *PlacedTerm) {
		out = append(out, fmt.Sprintf("%s/%s/%s/%p/%d", pt.Node.Name(), pt.Pod.Key, kinds[pt.Kind], pt.Term, pt.Weight))
	}
	if anti {
		s.EachAntiAffinityTerm(pod, fn)
	} else {
		s.EachScoringTerm(pod, fn)
	}
	slices.Sort(out)
	return out
}

func brutePods(s *Snapshot, t *AffinityTerm) []string {
	var out []string
	for _, ni := range s.Nodes {
		for _, pi := range ni.Pods {
			if t.Matches(pi.Pod) {
				out = append(out, ni.Name()+"/"+pi.Key)
			}
		}
	}
	slices.Sort(out)
	return out
}

// TestIndexesAgainstBruteForce applies random adds, removals, pod updates
// and node changes (labels, removal, re-adding) to a snapshot and checks
// after every step that the indexes answer what walking every pod answers:
// the pods any term selects, the placed terms selecting any pod; and that
// every node's interned labels are its labels.
func TestIndexesAgainstBruteForce(t *testing.T) {
	rnd := rand.New(rand.NewPCG(7, 11))
	nodes := []string{"n1", "n2", "n3", "n4"}
	s := NewSnapshot(nil, nil)
	for _, n := range nodes {
		s.AddNode(zoned(n, "z1"))
	}
	where := map[string]string{} // pod key -> node
	var names []string
	for i := range 60 {
		names = append(names, fmt.Sprintf("p%02d", i))
	}
	for step := range 600 {
		switch op := rnd.IntN(10); {
		case op < 6: // add or update a pod
			name := names[rnd.IntN(len(names))]
			p := randomPod(rnd, name, nodes[rnd.IntN(len(nodes))])
			for key, node := range where {
				if key[2:] == name {
					s.RemovePod(key, node)
					delete(where, key)
				}
			}
			s.AddPod(NewPodInfo(p, 0), p.Spec.NodeName)
			where[p.Namespace+"/"+p.Name] = p.Spec.NodeName
		case op < 8: // remove a pod
			for key, node := range where {
				if !s.RemovePod(key, node) {
					t.Fatalf("step %d: %s not on %s", step, key, node)
				}
				delete(where, key)
				break
			}
		case op < 9: // relabel a node
			s.AddNode(zoned(nodes[rnd.IntN(len(nodes))], []string{"z1", "z2", ""}[rnd.IntN(3)]))
		default: // remove a node, or bring it back
			n := nodes[rnd.IntN(len(nodes))]
			if s.NodeInfo(n) != nil {
				s.RemoveNode(n)
			} else {
				s.AddNode(zoned(n, "z2"))
			}
		}
		for _, ni := range s.Nodes {
			if got := s.topologyOf(ni.Node); !maps.Equal(got, ni.Node.Labels) {
				t.Fatalf("step %d: node %s interned as %v, labels %v", step, ni.Name(), got, ni.Node.Labels)
			}
		}
		probe := randomPod(rnd, "probe", "")
		for _, anti := range []bool{true, false} {
			if got, want := indexedTerms(s, probe, anti), bruteTerms(s, probe, anti); !slices.Equal(got, want) {
				t.Fatalf("step %d: terms selecting %v (anti %v):\n got %v\nwant %v", step, probe.Labels, anti, got, want)
			}
		}
		owner := labelled(probe.Namespace, "owner", "")
		term := mustTerm(t, owner, randomTerm(rnd))
		if got, want := matching(s, term), brutePods(s, term); !slices.Equal(got, want) {
			t.Fatalf("step %d: pods selected by %v:\n got %v\nwant %v", step, term.Selector, got, want)
		}
	}
	for key, node := range where {
		s.RemovePod(key, node)
	}
	if len(s.pods.byLabel)+len(s.pods.byNamespace)+len(s.antiTerms.byLabel)+len(s.antiTerms.unindexed)+len(s.antiTerms.byPod)+
		len(s.scoreTerms.byLabel)+len(s.scoreTerms.unindexed)+len(s.scoreTerms.byPod) != 0 {
		t.Fatalf("indexes not empty after removing every pod: %+v %+v %+v", s.pods, s.antiTerms, s.scoreTerms)
	}
}
