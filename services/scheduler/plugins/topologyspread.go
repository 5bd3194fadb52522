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

var (
	statusTopologySpread        = fw.NewStatus(fw.Unschedulable, ErrReasonTopologySpread).WithPlugin(PodTopologySpreadName)
	statusTopologySpreadNoLabel = fw.NewStatus(fw.UnschedulableAndUnresolvable, ErrReasonTopologySpreadNoLabel).WithPlugin(PodTopologySpreadName)
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
	maxSkew    int64
	key        string
	minDomains int
	// keyID is key's id in the snapshot of the cycle (-1: no node has it),
	// set by resolve.
	keyID int32
	// pods selects the pods counted: the pod's namespace, the selector.
	pods        fw.AffinityTerm
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
		out = append(out, constraint{maxSkew: int64(c.MaxSkew), key: c.TopologyKey, minDomains: minDomains, keyID: -1,
			pods:        fw.AffinityTerm{Namespaces: map[string]struct{}{pod.Namespace: {}}, Selector: sel},
			selfMatches: sel.Matches(labels.Set(pod.Labels))})
	}
	return out, nil
}

// resolve sets the constraints' key ids for snap.
func resolve(snap *fw.Snapshot, cs []constraint) {
	for i := range cs {
		if k, ok := snap.TopologyKey(cs[i].key); ok {
			cs[i].keyID = k
		}
	}
}

func hasAllKeys(ni *fw.NodeInfo, cs []constraint) bool {
	for i := range cs {
		if ni.TopologyValue(cs[i].keyID) < 0 {
			return false
		}
	}
	return true
}

// eligible reports whether a node's pods count toward the pod's domains.
func eligible(req *requiredNodeAffinity, ni *fw.NodeInfo, cs []constraint) bool {
	return ni.Node != nil && hasAllKeys(ni, cs) && req.Match(ni.Node)
}

// domains are the domains of a constraint: nodes[v] is the number of
// eligible nodes with value id v of its key (a domain when positive), n
// the number of domains.
type domains struct {
	nodes []int32
	n     int
}

// domainsOf returns, per constraint, its domains over the eligible nodes.
// With one constraint and no node affinity they are the snapshot's own
// count (read only); otherwise every node is visited.
func domainsOf(snap *fw.Snapshot, req *requiredNodeAffinity, cs []constraint) []domains {
	out := make([]domains, len(cs))
	if len(cs) == 1 && req.matchesEveryNode() {
		if k := cs[0].keyID; k >= 0 {
			out[0].nodes = snap.TopologyDomains(k)
			for _, n := range out[0].nodes {
				if n > 0 {
					out[0].n++
				}
			}
		}
		return out
	}
	for i, c := range cs {
		if c.keyID >= 0 {
			out[i].nodes = make([]int32, len(snap.TopologyDomains(c.keyID)))
		}
	}
	for _, ni := range snap.Nodes {
		if eligible(req, ni, cs) {
			for i, c := range cs {
				v := ni.TopologyValue(c.keyID)
				if out[i].nodes[v]++; out[i].nodes[v] == 1 {
					out[i].n++
				}
			}
		}
	}
	return out
}

// countPods returns, per constraint, the number of matching pods per
// value id of its key, over the eligible nodes; terminating pods do not
// count. Only the pods the constraints' selectors select are visited.
func countPods(snap *fw.Snapshot, req *requiredNodeAffinity, cs []constraint) []map[int32]int64 {
	counts := make([]map[int32]int64, len(cs))
	for i := range cs {
		m := map[int32]int64{}
		snap.EachPodMatching(&cs[i].pods, func(ni *fw.NodeInfo, p *fw.PodInfo) {
			if p.Pod.DeletionTimestamp == nil && eligible(req, ni, cs) {
				m[ni.TopologyValue(cs[i].keyID)]++
			}
		})
		counts[i] = m
	}
	return counts
}

type spreadState struct {
	constraints []constraint
	req         requiredNodeAffinity
	// counts[i] maps the domains of constraint i (value ids) to their
	// matching pods, zeros left out; domains[i] are all its domains (read
	// only, maybe the snapshot's); min[i] the smallest count over them,
	// refreshed after every change.
	counts  []map[int32]int64
	domains []domains
	min     []int64
}

func (s *spreadState) Clone() fw.StateData {
	c := *s
	c.counts = make([]map[int32]int64, len(s.counts))
	for i, m := range s.counts {
		c.counts[i] = make(map[int32]int64, len(m))
		for k, v := range m {
			c.counts[i][k] = v
		}
	}
	c.min = append([]int64(nil), s.min...)
	return &c
}

// refreshMin: a domain without matching pods makes the minimum 0; so do
// fewer domains than minDomains.
func (s *spreadState) refreshMin() {
	for i, c := range s.constraints {
		m := int64(math.MaxInt64)
		if len(s.counts[i]) < s.domains[i].n {
			m = 0
		}
		for _, n := range s.counts[i] {
			m = min(m, n)
		}
		if s.domains[i].n < c.minDomains || m == math.MaxInt64 {
			m = 0
		}
		s.min[i] = m
	}
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
	resolve(snap, cs)
	s := &spreadState{constraints: cs, req: req, domains: domainsOf(snap, &req, cs), counts: countPods(snap, &req, cs),
		min: make([]int64, len(cs))}
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
	if !ok || other.Pod.Namespace != pod.Pod.Namespace || other.Pod.DeletionTimestamp != nil || !eligible(&s.req, ni, s.constraints) {
		return nil
	}
	for i, c := range s.constraints {
		if c.pods.Matches(other.Pod) {
			v := ni.TopologyValue(c.keyID)
			if s.counts[i][v] += d; s.counts[i][v] <= 0 {
				delete(s.counts[i], v)
			}
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
	for i := range s.constraints {
		c := &s.constraints[i]
		v := ni.TopologyValue(c.keyID)
		if v < 0 {
			return statusTopologySpreadNoLabel
		}
		self := int64(0)
		if c.selfMatches {
			self = 1
		}
		if s.counts[i][v]+self-s.min[i] > c.maxSkew {
			return statusTopologySpread
		}
	}
	return nil
}
