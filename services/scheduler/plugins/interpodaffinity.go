package plugins

import (
	"context"
	"fmt"
	"math"
	"slices"

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

var (
	statusAffinity             = fw.NewStatus(fw.UnschedulableAndUnresolvable, ErrReasonAffinity).WithPlugin(InterPodAffinityName)
	statusAntiAffinity         = fw.NewStatus(fw.Unschedulable, ErrReasonAntiAffinity).WithPlugin(InterPodAffinityName)
	statusExistingAntiAffinity = fw.NewStatus(fw.Unschedulable, ErrReasonExistingAntiAffinity).WithPlugin(InterPodAffinityName)
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

// domainCounts counts pods per topology domain (interned: see
// framework/topology.go).
type domainCounts map[fw.DomainID]int64

// update adds d in ni's domain of key id k, if ni has the label.
func (m domainCounts) update(ni *fw.NodeInfo, k int32, d int64) {
	if dom, ok := ni.Domain(k); ok {
		if m[dom] += d; m[dom] == 0 {
			delete(m, dom)
		}
	}
}

func (m domainCounts) clone() domainCounts {
	c := make(domainCounts, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// keyIDs are the key ids of terms' topology keys (-1: no node has it).
func keyIDs(snap *fw.Snapshot, terms []fw.AffinityTerm) []int32 {
	out := make([]int32, len(terms))
	for i := range terms {
		k, ok := snap.TopologyKey(terms[i].TopologyKey)
		if !ok {
			k = -1
		}
		out[i] = k
	}
	return out
}

type affinityState struct {
	snap *fw.Snapshot
	// existingAnti counts, per domain, existing pods whose required
	// anti-affinity matches the incoming pod; antiKeys are the key ids it
	// has domains of (so Filter looks up only those).
	existingAnti domainCounts
	antiKeys     []int32
	// affinity counts, per domain of each required affinity term, the pods
	// matching all the incoming pod's terms; anti those matching any
	// required anti-affinity term. affKeys and ownAntiKeys are the key ids
	// of those terms.
	affinity, anti       domainCounts
	affKeys, ownAntiKeys []int32
}

func (s *affinityState) Clone() fw.StateData {
	c := *s
	c.existingAnti, c.affinity, c.anti = s.existingAnti.clone(), s.affinity.clone(), s.anti.clone()
	return &c
}

// addAntiKey notes a key id of existingAnti (the slice may be shared with
// clones: it is copied, never appended to in place).
func (s *affinityState) addAntiKey(k int32) {
	if !slices.Contains(s.antiKeys, k) {
		s.antiKeys = append(slices.Clip(s.antiKeys), k)
	}
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

// updateWith accounts existing (on ni) in s for incoming pod, d = ±1.
func (s *affinityState) updateWith(pod, existing *fw.PodInfo, ni *fw.NodeInfo, d int64) {
	for i := range existing.RequiredAntiAffinity {
		if t := &existing.RequiredAntiAffinity[i]; t.Matches(pod.Pod) {
			if k, ok := s.snap.TopologyKey(t.TopologyKey); ok {
				s.existingAnti.update(ni, k, d)
				s.addAntiKey(k)
			}
		}
	}
	if matchesAll(pod.RequiredAffinity, existing.Pod) {
		for _, k := range s.affKeys {
			s.affinity.update(ni, k, d)
		}
	}
	for i, k := range s.ownAntiKeys {
		if pod.RequiredAntiAffinity[i].Matches(existing.Pod) {
			s.anti.update(ni, k, d)
		}
	}
}

// PreFilter counts, per topology domain, the placed pods' required
// anti-affinity terms that select the pod, and the pods its own required
// terms select, visiting only those (the snapshot's indexes) rather than
// every pod.
func (InterPodAffinity) PreFilter(_ context.Context, state *fw.CycleState, pod *fw.PodInfo, snap *fw.Snapshot) *fw.Status {
	if pod.ParseError != nil {
		return fw.NewStatus(fw.UnschedulableAndUnresolvable, fmt.Sprintf("parsing pod: %v", pod.ParseError))
	}
	s := &affinityState{snap: snap, existingAnti: domainCounts{}, affinity: domainCounts{}, anti: domainCounts{}}
	snap.EachAntiAffinityTerm(pod.Pod, func(pt *fw.PlacedTerm) {
		if k, ok := snap.TopologyKey(pt.Term.TopologyKey); ok {
			s.existingAnti.update(pt.Node, k, 1)
		}
	})
	for dom := range s.existingAnti {
		s.addAntiKey(dom.Key)
	}
	if len(s.existingAnti) == 0 && len(pod.RequiredAffinity) == 0 && len(pod.RequiredAntiAffinity) == 0 {
		return fw.NewStatus(fw.Skip)
	}
	s.affKeys, s.ownAntiKeys = keyIDs(snap, pod.RequiredAffinity), keyIDs(snap, pod.RequiredAntiAffinity)
	if len(pod.RequiredAffinity) > 0 {
		// The pods matching every term are among those matching the first.
		snap.EachPodMatching(&pod.RequiredAffinity[0], func(ni *fw.NodeInfo, ex *fw.PodInfo) {
			if matchesAll(pod.RequiredAffinity, ex.Pod) {
				for _, k := range s.affKeys {
					s.affinity.update(ni, k, 1)
				}
			}
		})
	}
	for i, k := range s.ownAntiKeys {
		snap.EachPodMatching(&pod.RequiredAntiAffinity[i], func(ni *fw.NodeInfo, _ *fw.PodInfo) { s.anti.update(ni, k, 1) })
	}
	state.Write(InterPodAffinityName, s)
	return nil
}

func (InterPodAffinity) AddPod(state *fw.CycleState, pod, add *fw.PodInfo, ni *fw.NodeInfo) *fw.Status {
	if s, ok := state.Read(InterPodAffinityName).(*affinityState); ok {
		s.updateWith(pod, add, ni, 1)
	}
	return nil
}

func (InterPodAffinity) RemovePod(state *fw.CycleState, pod, remove *fw.PodInfo, ni *fw.NodeInfo) *fw.Status {
	if s, ok := state.Read(InterPodAffinityName).(*affinityState); ok {
		s.updateWith(pod, remove, ni, -1)
	}
	return nil
}

func (InterPodAffinity) Filter(state *fw.CycleState, pod *fw.PodInfo, ni *fw.NodeInfo) *fw.Status {
	s, ok := state.Read(InterPodAffinityName).(*affinityState)
	if !ok {
		return fw.AsStatus(fmt.Errorf("plugins: %s: no prefilter state", InterPodAffinityName))
	}
	if !s.satisfiesAffinity(pod, ni) {
		return statusAffinity
	}
	for _, k := range s.ownAntiKeys {
		if dom, ok := ni.Domain(k); ok && s.anti[dom] > 0 {
			return statusAntiAffinity
		}
	}
	for _, k := range s.antiKeys {
		if dom, ok := ni.Domain(k); ok && s.existingAnti[dom] > 0 {
			return statusExistingAntiAffinity
		}
	}
	return nil
}

// satisfiesAffinity: every term's domain on this node must hold a matching
// pod; except for the first pod of a group with affinity to itself (no pod
// matches anywhere, and the pod matches its own terms).
func (s *affinityState) satisfiesAffinity(pod *fw.PodInfo, ni *fw.NodeInfo) bool {
	podsExist := true
	for _, k := range s.affKeys {
		dom, ok := ni.Domain(k)
		if !ok {
			return false
		}
		if s.affinity[dom] <= 0 {
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

func (m *affinityScoreState) add(key string, node *corev1.Node, weight int64) {
	v, ok := node.Labels[key]
	if weight == 0 || !ok {
		return
	}
	if m.score[key] == nil {
		m.score[key] = map[string]int64{}
	}
	m.score[key][v] += weight
}

// PreScore sums, per topology domain, the weights of the pod's preferred
// terms over the pods they select, and of the placed pods' terms that
// select the pod (required affinity with HardPodAffinityWeight, preferred
// affinity, preferred anti-affinity negated).
func (InterPodAffinity) PreScore(_ context.Context, state *fw.CycleState, pod *fw.PodInfo, snap *fw.Snapshot, _ []*fw.NodeInfo) *fw.Status {
	s := &affinityScoreState{score: map[string]map[string]int64{}}
	for i := range pod.PreferredAffinity {
		t := &pod.PreferredAffinity[i]
		snap.EachPodMatching(&t.AffinityTerm, func(ni *fw.NodeInfo, _ *fw.PodInfo) { s.add(t.TopologyKey, ni.Node, int64(t.Weight)) })
	}
	for i := range pod.PreferredAntiAffinity {
		t := &pod.PreferredAntiAffinity[i]
		snap.EachPodMatching(&t.AffinityTerm, func(ni *fw.NodeInfo, _ *fw.PodInfo) { s.add(t.TopologyKey, ni.Node, -int64(t.Weight)) })
	}
	snap.EachScoringTerm(pod.Pod, func(pt *fw.PlacedTerm) {
		var w int64
		switch pt.Kind {
		case fw.RequiredAffinity:
			w = HardPodAffinityWeight
		case fw.PreferredAffinity:
			w = int64(pt.Weight)
		case fw.PreferredAntiAffinity:
			w = -int64(pt.Weight)
		}
		s.add(pt.Term.TopologyKey, pt.Node.Node, w)
	})
	if len(s.score) == 0 {
		return fw.NewStatus(fw.Skip)
	}
	state.Write(InterPodAffinityName+"/score", s)
	return nil
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
