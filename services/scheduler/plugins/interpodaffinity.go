package plugins

import (
	"context"
	"fmt"
	"math"

	corev1 "k8s.io/api/core/v1"

	fw "github.com/cairn-dev/cairn/services/scheduler/framework"
)

// InterPodAffinityName is the plugin's name.
const InterPodAffinityName = "InterPodAffinity"

// InterPodAffinity reasons, as kube-scheduler words them.
const (
	ErrReasonExistingAntiAffinity = "node(s) didn't satisfy existing pods anti-affinity rules"
	ErrReasonAffinity             = "node(s) didn't match pod affinity rules"
	ErrReasonAntiAffinity         = "node(s) didn't match pod anti-affinity rules"
)

// HardPodAffinityWeight is the score weight an existing pod's required
// affinity term gives the incoming pod it matches (kube's default 1).
const HardPodAffinityWeight = 1

// InterPodAffinity enforces required pod affinity and anti-affinity, of
// the incoming pod and (anti-affinity) of the pods already placed, per
// topology domain; and scores nodes by preferred terms in both directions.
type InterPodAffinity struct{}

var (
	_ fw.PreFilterPlugin     = InterPodAffinity{}
	_ fw.PreFilterExtensions = InterPodAffinity{}
	_ fw.FilterPlugin        = InterPodAffinity{}
	_ fw.PreScorePlugin      = InterPodAffinity{}
	_ fw.ScorePlugin         = InterPodAffinity{}
	_ fw.ScoreNormalizer     = InterPodAffinity{}
)

func (InterPodAffinity) Name() string { return InterPodAffinityName }

type topologyPair struct{ key, value string }

type pairCounts map[topologyPair]int64

func (m pairCounts) update(node *corev1.Node, key string, d int64) {
	if v, ok := node.Labels[key]; ok {
		p := topologyPair{key, v}
		if m[p] += d; m[p] == 0 {
			delete(m, p)
		}
	}
}

func (m pairCounts) clone() pairCounts {
	c := make(pairCounts, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

type affinityState struct {
	// existingAnti counts, per domain, existing pods whose required
	// anti-affinity matches the incoming pod.
	existingAnti pairCounts
	// affinity counts, per domain of each required affinity term, the pods
	// matching all the incoming pod's terms; anti those matching any
	// required anti-affinity term.
	affinity, anti pairCounts
}

func (s *affinityState) Clone() fw.StateData {
	return &affinityState{existingAnti: s.existingAnti.clone(), affinity: s.affinity.clone(), anti: s.anti.clone()}
}

func matchesAll(terms []fw.AffinityTerm, pod *corev1.Pod) bool {
	if len(terms) == 0 {
		return false
	}
	for i := range terms {
		if !terms[i].Matches(pod) {
			return false
		}
	}
	return true
}

// updateWith accounts existing (on node) in s for incoming pod, d = ±1.
func (s *affinityState) updateWith(pod, existing *fw.PodInfo, node *corev1.Node, d int64) {
	for i := range existing.RequiredAntiAffinity {
		if t := &existing.RequiredAntiAffinity[i]; t.Matches(pod.Pod) {
			s.existingAnti.update(node, t.TopologyKey, d)
		}
	}
	if matchesAll(pod.RequiredAffinity, existing.Pod) {
		for i := range pod.RequiredAffinity {
			s.affinity.update(node, pod.RequiredAffinity[i].TopologyKey, d)
		}
	}
	for i := range pod.RequiredAntiAffinity {
		if t := &pod.RequiredAntiAffinity[i]; t.Matches(existing.Pod) {
			s.anti.update(node, t.TopologyKey, d)
		}
	}
}

func (InterPodAffinity) PreFilter(_ context.Context, state *fw.CycleState, pod *fw.PodInfo, snap *fw.Snapshot) *fw.Status {
	if pod.ParseError != nil {
		return fw.NewStatus(fw.UnschedulableAndUnresolvable, fmt.Sprintf("parsing pod: %v", pod.ParseError))
	}
	s := &affinityState{existingAnti: pairCounts{}, affinity: pairCounts{}, anti: pairCounts{}}
	for _, ni := range snap.HavePodsWithRequiredAntiAffinity() {
		for _, ex := range ni.PodsWithRequiredAntiAffinity {
			for i := range ex.RequiredAntiAffinity {
				if t := &ex.RequiredAntiAffinity[i]; t.Matches(pod.Pod) {
					s.existingAnti.update(ni.Node, t.TopologyKey, 1)
				}
			}
		}
	}
	if len(s.existingAnti) == 0 && len(pod.RequiredAffinity) == 0 && len(pod.RequiredAntiAffinity) == 0 {
		return fw.NewStatus(fw.Skip)
	}
	if len(pod.RequiredAffinity) > 0 || len(pod.RequiredAntiAffinity) > 0 {
		for _, ni := range snap.Nodes {
			for _, ex := range ni.Pods {
				if matchesAll(pod.RequiredAffinity, ex.Pod) {
					for i := range pod.RequiredAffinity {
						s.affinity.update(ni.Node, pod.RequiredAffinity[i].TopologyKey, 1)
					}
				}
				for i := range pod.RequiredAntiAffinity {
					if t := &pod.RequiredAntiAffinity[i]; t.Matches(ex.Pod) {
						s.anti.update(ni.Node, t.TopologyKey, 1)
					}
				}
			}
		}
	}
	state.Write(InterPodAffinityName, s)
	return nil
}

func (InterPodAffinity) AddPod(state *fw.CycleState, pod, add *fw.PodInfo, ni *fw.NodeInfo) *fw.Status {
	if s, ok := state.Read(InterPodAffinityName).(*affinityState); ok {
		s.updateWith(pod, add, ni.Node, 1)
	}
	return nil
}

func (InterPodAffinity) RemovePod(state *fw.CycleState, pod, remove *fw.PodInfo, ni *fw.NodeInfo) *fw.Status {
	if s, ok := state.Read(InterPodAffinityName).(*affinityState); ok {
		s.updateWith(pod, remove, ni.Node, -1)
	}
	return nil
}

func (InterPodAffinity) Filter(state *fw.CycleState, pod *fw.PodInfo, ni *fw.NodeInfo) *fw.Status {
	s, ok := state.Read(InterPodAffinityName).(*affinityState)
	if !ok {
		return fw.AsStatus(fmt.Errorf("plugins: %s: no prefilter state", InterPodAffinityName))
	}
	if !s.satisfiesAffinity(pod, ni.Node) {
		return fw.NewStatus(fw.UnschedulableAndUnresolvable, ErrReasonAffinity)
	}
	for i := range pod.RequiredAntiAffinity {
		key := pod.RequiredAntiAffinity[i].TopologyKey
		if v, ok := ni.Node.Labels[key]; ok && s.anti[topologyPair{key, v}] > 0 {
			return fw.NewStatus(fw.Unschedulable, ErrReasonAntiAffinity)
		}
	}
	if len(s.existingAnti) > 0 {
		for k, v := range ni.Node.Labels {
			if s.existingAnti[topologyPair{k, v}] > 0 {
				return fw.NewStatus(fw.Unschedulable, ErrReasonExistingAntiAffinity)
			}
		}
	}
	return nil
}

// satisfiesAffinity: every term's domain on this node must hold a matching
// pod; except for the first pod of a group with affinity to itself (no pod
// matches anywhere, and the pod matches its own terms).
func (s *affinityState) satisfiesAffinity(pod *fw.PodInfo, node *corev1.Node) bool {
	podsExist := true
	for i := range pod.RequiredAffinity {
		key := pod.RequiredAffinity[i].TopologyKey
		v, ok := node.Labels[key]
		if !ok {
			return false
		}
		if s.affinity[topologyPair{key, v}] <= 0 {
			podsExist = false
		}
	}
	if podsExist {
		return true
	}
	return len(s.affinity) == 0 && matchesAll(pod.RequiredAffinity, pod.Pod)
}

type affinityScoreState struct {
	// score per topology key, per value.
	score map[string]map[string]int64
}

func (s *affinityScoreState) Clone() fw.StateData { return s }

func (m *affinityScoreState) add(t *fw.AffinityTerm, weight int64, target *corev1.Pod, node *corev1.Node) {
	if weight == 0 || !t.Matches(target) {
		return
	}
	v, ok := node.Labels[t.TopologyKey]
	if !ok {
		return
	}
	if m.score[t.TopologyKey] == nil {
		m.score[t.TopologyKey] = map[string]int64{}
	}
	m.score[t.TopologyKey][v] += weight
}

func (InterPodAffinity) PreScore(_ context.Context, state *fw.CycleState, pod *fw.PodInfo, snap *fw.Snapshot, _ []*fw.NodeInfo) *fw.Status {
	hasPreferred := len(pod.PreferredAffinity)+len(pod.PreferredAntiAffinity) > 0
	nodes := snap.HavePodsWithAffinity()
	if hasPreferred {
		nodes = snap.Nodes
	}
	if len(nodes) == 0 {
		return fw.NewStatus(fw.Skip)
	}
	s := &affinityScoreState{score: map[string]map[string]int64{}}
	for _, ni := range nodes {
		pods := ni.PodsWithAffinity
		if hasPreferred {
			pods = ni.Pods
		}
		for _, ex := range pods {
			s.processExisting(pod, ex, ni.Node)
		}
	}
	if len(s.score) == 0 {
		return fw.NewStatus(fw.Skip)
	}
	state.Write(InterPodAffinityName+"/score", s)
	return nil
}

func (s *affinityScoreState) processExisting(pod, ex *fw.PodInfo, node *corev1.Node) {
	for i := range pod.PreferredAffinity {
		t := &pod.PreferredAffinity[i]
		s.add(&t.AffinityTerm, int64(t.Weight), ex.Pod, node)
	}
	for i := range pod.PreferredAntiAffinity {
		t := &pod.PreferredAntiAffinity[i]
		s.add(&t.AffinityTerm, -int64(t.Weight), ex.Pod, node)
	}
	for i := range ex.RequiredAffinity {
		s.add(&ex.RequiredAffinity[i], HardPodAffinityWeight, pod.Pod, node)
	}
	for i := range ex.PreferredAffinity {
		t := &ex.PreferredAffinity[i]
		s.add(&t.AffinityTerm, int64(t.Weight), pod.Pod, node)
	}
	for i := range ex.PreferredAntiAffinity {
		t := &ex.PreferredAntiAffinity[i]
		s.add(&t.AffinityTerm, -int64(t.Weight), pod.Pod, node)
	}
}

func (InterPodAffinity) Score(state *fw.CycleState, _ *fw.PodInfo, ni *fw.NodeInfo) (int64, *fw.Status) {
	s, _ := state.Read(InterPodAffinityName + "/score").(*affinityScoreState)
	if s == nil {
		return 0, nil
	}
	var sum int64
	for key, values := range s.score {
		if v, ok := ni.Node.Labels[key]; ok {
			sum += values[v]
		}
	}
	return sum, nil
}

// NormalizeScore maps [min, max] of the raw scores onto [0, 100].
func (InterPodAffinity) NormalizeScore(_ *fw.CycleState, _ *fw.PodInfo, scores []fw.NodeScore) *fw.Status {
	lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
	for _, s := range scores {
		lo, hi = min(lo, s.Score), max(hi, s.Score)
	}
	for i := range scores {
		if hi > lo {
			scores[i].Score = int64(float64(fw.MaxNodeScore) * float64(scores[i].Score-lo) / float64(hi-lo))
		} else {
			scores[i].Score = 0
		}
	}
	return nil
}
