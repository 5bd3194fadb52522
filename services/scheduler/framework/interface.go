package framework

import (
	"context"
)

// MaxNodeScore is the highest score a Score plugin gives after
// normalisation; MinNodeScore the lowest.
const (
	MaxNodeScore int64 = 100
	MinNodeScore int64 = 0
)

// Plugin is anything the framework runs; Name identifies it in statuses,
// weights and the cycle state.
type Plugin interface {
	Name() string
}

// PreFilterPlugin runs once per scheduling cycle before any Filter: it
// precomputes what its Filter needs (into the CycleState) and may reject
// the pod for every node at once (the rejection's message becomes the
// FitError's PreFilterMsg) or return Skip to have its Filter skipped.
type PreFilterPlugin interface {
	Plugin
	PreFilter(ctx context.Context, state *CycleState, pod *PodInfo, snap *Snapshot) *Status
}

// PreFilterExtensions update a PreFilter plugin's precomputed state when a
// pod is added to or removed from a node during the cycle: nominated pods
// (Framework.RunFilters) and preemption's what-if evictions.
type PreFilterExtensions interface {
	AddPod(state *CycleState, pod, add *PodInfo, node *NodeInfo) *Status
	RemovePod(state *CycleState, pod, remove *PodInfo, node *NodeInfo) *Status
}

// FilterPlugin says whether the pod can run on one node. It is called
// concurrently for different nodes and must only read the state and node.
type FilterPlugin interface {
	Plugin
	Filter(state *CycleState, pod *PodInfo, node *NodeInfo) *Status
}

// PreScorePlugin runs once before Score with the feasible nodes; Skip
// skips its Score.
type PreScorePlugin interface {
	Plugin
	PreScore(ctx context.Context, state *CycleState, pod *PodInfo, snap *Snapshot, nodes []*NodeInfo) *Status
}

// ScorePlugin ranks a feasible node. It is called concurrently for
// different nodes. Unless it also implements ScoreNormalizer, its scores
// must lie in [MinNodeScore, MaxNodeScore].
type ScorePlugin interface {
	Plugin
	Score(state *CycleState, pod *PodInfo, node *NodeInfo) (int64, *Status)
}

// ScoreNormalizer rescales a ScorePlugin's raw scores, in place, into
// [MinNodeScore, MaxNodeScore] once all nodes are scored.
type ScoreNormalizer interface {
	NormalizeScore(state *CycleState, pod *PodInfo, scores []NodeScore) *Status
}

// NodeScore is one node's score.
type NodeScore struct {
	Name  string
	Score int64
}

// DefaultNormalizeScore scales scores so the highest becomes maxPriority
// (kube's helper.DefaultNormalizeScore); with reverse, high raw scores
// become low ones. All zero stays all zero (or all maxPriority reversed).
func DefaultNormalizeScore(maxPriority int64, reverse bool, scores []NodeScore) {
	var maxCount int64
	for _, s := range scores {
		maxCount = max(maxCount, s.Score)
	}
	if maxCount == 0 {
		if reverse {
			for i := range scores {
				scores[i].Score = maxPriority
			}
		}
		return
	}
	for i := range scores {
		s := maxPriority * scores[i].Score / maxCount
		if reverse {
			s = maxPriority - s
		}
		scores[i].Score = s
	}
}

// StateData is what a plugin keeps in the CycleState. Clone must return a
// copy that PreFilterExtensions can change without affecting the original.
type StateData interface {
	Clone() StateData
}

// CycleState is the per-cycle scratch space of the plugins, keyed by
// plugin name. Writes happen in PreFilter/PreScore (one goroutine); Filter
// and Score only read.
type CycleState struct {
	// data holds each plugin's state: a short list searched linearly,
	// cheaper than a map lookup (a string hash) for every Filter call.
	data []stateEntry
	// skipFilter / skipScore name the plugins whose PreFilter / PreScore
	// returned Skip.
	skipFilter, skipScore map[string]bool
	// filters are the Filter plugins to run (those not skipped), set by
	// RunPreFilter; nil before.
	filters []FilterPlugin
}

type stateEntry struct {
	key  string
	data StateData
}

// NewCycleState returns an empty state.
func NewCycleState() *CycleState {
	return &CycleState{skipFilter: map[string]bool{}, skipScore: map[string]bool{}}
}

// Read returns the data stored under key, nil if none.
func (c *CycleState) Read(key string) StateData {
	for i := range c.data {
		if c.data[i].key == key {
			return c.data[i].data
		}
	}
	return nil
}

// Write stores data under key.
func (c *CycleState) Write(key string, d StateData) {
	for i := range c.data {
		if c.data[i].key == key {
			c.data[i].data = d
			return
		}
	}
	c.data = append(c.data, stateEntry{key, d})
}

// Clone deep-copies the state (each StateData through its Clone).
func (c *CycleState) Clone() *CycleState {
	n := &CycleState{data: make([]stateEntry, 0, len(c.data)), skipFilter: make(map[string]bool, len(c.skipFilter)),
		skipScore: make(map[string]bool, len(c.skipScore)), filters: c.filters}
	for _, e := range c.data {
		if e.data != nil {
			n.data = append(n.data, stateEntry{e.key, e.data.Clone()})
		}
	}
	for k, v := range c.skipFilter {
		n.skipFilter[k] = v
	}
	for k, v := range c.skipScore {
		n.skipScore[k] = v
	}
	return n
}

// PreBindPlugin runs after a node is chosen, before the binding is
// posted, off the scheduling loop (one goroutine per binding): it makes
// the writes the binding needs first (VolumeBinding binds the pod's
// claims) and may wait for them. A failed PreBind fails the attempt: the
// pod is retried with back-off and its binding is not posted.
type PreBindPlugin interface {
	Plugin
	PreBind(ctx context.Context, pod *PodInfo, nodeName string) *Status
}
