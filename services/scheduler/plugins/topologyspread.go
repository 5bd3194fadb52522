package plugins

import (
	"context"
	"fmt"
	"math"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	fw "github.com/cairn-dev/cairn/services/scheduler/framework"
)

// PodTopologySpreadName is the plugin's name.
const PodTopologySpreadName = "PodTopologySpread"

// PodTopologySpread reasons, as kube-scheduler words them.
const (
	ErrReasonTopologySpread        = "node(s) didn't match pod topology spread constraints"
	ErrReasonTopologySpreadNoLabel = ErrReasonTopologySpread + " (missing required label)"
)

// PodTopologySpread enforces the pod's DoNotSchedule topology spread
// constraints (placing the pod must not make the number of matching pods
// in the node's domain exceed the least populated domain by more than
// maxSkew) and scores ScheduleAnyway constraints (fewer matching pods in
// the node's domain scores higher). Domains are counted over the nodes
// that pass the pod's nodeSelector and required node affinity and carry
// every constraint's topology key (nodeAffinityPolicy Honor,
// nodeTaintsPolicy Ignore, the defaults); terminating pods do not count.
// Cluster-level default constraints are not applied.
type PodTopologySpread struct{}

var (
	_ fw.PreFilterPlugin     = PodTopologySpread{}
	_ fw.PreFilterExtensions = PodTopologySpread{}
	_ fw.FilterPlugin        = PodTopologySpread{}
	_ fw.PreScorePlugin      = PodTopologySpread{}
	_ fw.ScorePlugin         = PodTopologySpread{}
	_ fw.ScoreNormalizer     = PodTopologySpread{}
)

func (PodTopologySpread) Name() string { return PodTopologySpreadName }

type constraint struct {
	maxSkew     int64
	key         string
	minDomains  int
	selector    labels.Selector
	selfMatches bool
}

func compileConstraints(pod *corev1.Pod, when corev1.UnsatisfiableConstraintAction) ([]constraint, error) {
	var out []constraint
	for _, c := range pod.Spec.TopologySpreadConstraints {
		if c.WhenUnsatisfiable != when {
			continue
		}
		ls := c.LabelSelector
		if len(c.MatchLabelKeys) > 0 {
			ls = ls.DeepCopy()
			if ls == nil {
				ls = &metav1.LabelSelector{}
			}
			for _, k := range c.MatchLabelKeys {
				if v, ok := pod.Labels[k]; ok {
					ls.MatchExpressions = append(ls.MatchExpressions, metav1.LabelSelectorRequirement{
						Key: k, Operator: metav1.LabelSelectorOpIn, Values: []string{v}})
				}
			}
		}
		sel, err := metav1.LabelSelectorAsSelector(ls)
		if err != nil {
			return nil, fmt.Errorf("plugins: topology spread: %w", err)
		}
		minDomains := 1
		if c.MinDomains != nil {
			minDomains = int(*c.MinDomains)
		}
		out = append(out, constraint{maxSkew: int64(c.MaxSkew), key: c.TopologyKey, minDomains: minDomains,
			selector: sel, selfMatches: sel.Matches(labels.Set(pod.Labels))})
	}
	return out, nil
}

func hasAllKeys(node *corev1.Node, cs []constraint) bool {
	for i := range cs {
		if _, ok := node.Labels[cs[i].key]; !ok {
			return false
		}
	}
	return true
}

func countMatching(ni *fw.NodeInfo, ns string, sel labels.Selector) int64 {
	var n int64
	for _, p := range ni.Pods {
		if p.Pod.Namespace == ns && p.Pod.DeletionTimestamp == nil && sel.Matches(labels.Set(p.Pod.Labels)) {
			n++
		}
	}
	return n
}

type spreadState struct {
	constraints []constraint
	counts      pairCounts
	// domains per constraint, with their count (0 included); min per
	// constraint, refreshed after every change.
	domains []map[string]struct{}
	min     []int64
}

func (s *spreadState) Clone() fw.StateData {
	c := &spreadState{constraints: s.constraints, counts: s.counts.clone(), domains: s.domains,
		min: append([]int64(nil), s.min...)}
	return c
}

func (s *spreadState) refreshMin() {
	for i, c := range s.constraints {
		m := int64(math.MaxInt64)
		for v := range s.domains[i] {
			m = min(m, s.counts[topologyPair{c.key, v}])
		}
		if len(s.domains[i]) < c.minDomains || m == math.MaxInt64 {
			m = 0
		}
		s.min[i] = m
	}
}

// eligible reports whether a node's pods count toward the pod's domains.
func eligible(req *requiredNodeAffinity, node *corev1.Node, cs []constraint) bool {
	return node != nil && hasAllKeys(node, cs) && req.Match(node)
}

func (PodTopologySpread) PreFilter(_ context.Context, state *fw.CycleState, pod *fw.PodInfo, snap *fw.Snapshot) *fw.Status {
	cs, err := compileConstraints(pod.Pod, corev1.DoNotSchedule)
	if err != nil {
		return fw.NewStatus(fw.UnschedulableAndUnresolvable, err.Error())
	}
	if len(cs) == 0 {
		return fw.NewStatus(fw.Skip)
	}
	req, err := compileRequired(pod.Pod)
	if err != nil {
		return fw.NewStatus(fw.UnschedulableAndUnresolvable, err.Error())
	}
	s := &spreadState{constraints: cs, counts: pairCounts{}, domains: make([]map[string]struct{}, len(cs)), min: make([]int64, len(cs))}
	for i := range cs {
		s.domains[i] = map[string]struct{}{}
	}
	for _, ni := range snap.Nodes {
		if !eligible(&req, ni.Node, cs) {
			continue
		}
		for i, c := range cs {
			v := ni.Node.Labels[c.key]
			s.domains[i][v] = struct{}{}
			if n := countMatching(ni, pod.Pod.Namespace, c.selector); n > 0 {
				s.counts[topologyPair{c.key, v}] += n
			}
		}
	}
	s.refreshMin()
	state.Write(PodTopologySpreadName, s)
	return nil
}

func (p PodTopologySpread) AddPod(state *fw.CycleState, pod, add *fw.PodInfo, ni *fw.NodeInfo) *fw.Status {
	return p.update(state, pod, add, ni, 1)
}

func (p PodTopologySpread) RemovePod(state *fw.CycleState, pod, remove *fw.PodInfo, ni *fw.NodeInfo) *fw.Status {
	return p.update(state, pod, remove, ni, -1)
}

func (PodTopologySpread) update(state *fw.CycleState, pod, other *fw.PodInfo, ni *fw.NodeInfo, d int64) *fw.Status {
	s, ok := state.Read(PodTopologySpreadName).(*spreadState)
	if !ok || ni.Node == nil || !hasAllKeys(ni.Node, s.constraints) || other.Pod.Namespace != pod.Pod.Namespace {
		return nil
	}
	req, err := compileRequired(pod.Pod)
	if err != nil || !req.Match(ni.Node) {
		return nil
	}
	for _, c := range s.constraints {
		if c.selector.Matches(labels.Set(other.Pod.Labels)) {
			s.counts.update(ni.Node, c.key, d)
		}
	}
	s.refreshMin()
	return nil
}

func (PodTopologySpread) Filter(state *fw.CycleState, _ *fw.PodInfo, ni *fw.NodeInfo) *fw.Status {
	s, ok := state.Read(PodTopologySpreadName).(*spreadState)
	if !ok {
		return fw.AsStatus(fmt.Errorf("plugins: %s: no prefilter state", PodTopologySpreadName))
	}
	for i, c := range s.constraints {
		v, ok := ni.Node.Labels[c.key]
		if !ok {
			return fw.NewStatus(fw.UnschedulableAndUnresolvable, ErrReasonTopologySpreadNoLabel)
		}
		self := int64(0)
		if c.selfMatches {
			self = 1
		}
		if s.counts[topologyPair{c.key, v}]+self-s.min[i] > c.maxSkew {
			return fw.NewStatus(fw.Unschedulable, ErrReasonTopologySpread)
		}
	}
	return nil
}
