package framework

import (
	"context"
	"fmt"
	"sync/atomic"
)

// prioritize runs PreScore, Score and NormalizeScore and returns the
// weighted total per feasible node, in a buffer the next cycle reuses.
func (f *Framework) prioritize(ctx context.Context, state *CycleState, pod *PodInfo, snap *Snapshot, nodes []*NodeInfo) ([]NodeScore, error) {
	for _, p := range f.preScores {
		st := p.PreScore(ctx, state, pod, snap, nodes)
		if st.IsSkip() {
			state.skipScore[p.Name()] = true
			continue
		}
		if !st.IsSuccess() {
			return nil, fmt.Errorf("framework: prescore %s: %w", p.Name(), st.AsError())
		}
	}
	var active []weighted
	for _, p := range f.scores {
		if !state.skipScore[p.Name()] {
			active = append(active, p)
		}
	}
	// One buffer, reused across cycles (Schedule holds f.mu).
	size := (len(active) + 1) * len(nodes)
	if cap(f.scoreBuf) < size {
		f.scoreBuf = make([]NodeScore, size)
	}
	buf := f.scoreBuf[:size]
	perPlugin := make([][]NodeScore, len(active))
	for i := range perPlugin {
		perPlugin[i] = buf[i*len(nodes) : (i+1)*len(nodes)]
	}
	var next atomic.Int32
	var failed atomic.Pointer[Status]
	parallel(f.opts.Parallelism, len(nodes), func() {
		for {
			i := int(next.Add(1)) - 1
			if i >= len(nodes) || failed.Load() != nil {
				return
			}
			for j, p := range active {
				s, st := p.Score(state, pod, nodes[i])
				if !st.IsSuccess() {
					failed.Store(st.WithPlugin(p.Name()))
					return
				}
				perPlugin[j][i] = NodeScore{Name: nodes[i].Name(), Score: s}
			}
		}
	})
	if st := failed.Load(); st != nil {
		return nil, fmt.Errorf("framework: score %s: %w", st.Plugin(), st.AsError())
	}
	totals := buf[len(active)*len(nodes):]
	for i, ni := range nodes {
		totals[i] = NodeScore{Name: ni.Name()}
	}
	for j, p := range active {
		if norm, ok := p.ScorePlugin.(ScoreNormalizer); ok {
			if st := norm.NormalizeScore(state, pod, perPlugin[j]); !st.IsSuccess() {
				return nil, fmt.Errorf("framework: normalize %s: %w", p.Name(), st.AsError())
			}
		}
		for i := range nodes {
			totals[i].Score += perPlugin[j][i].Score * p.weight
		}
	}
	return totals, nil
}

// selectHost returns the node with the highest score; among equal ones it
// picks uniformly at random (reservoir sampling, as kube-scheduler).
func (f *Framework) selectHost(scores []NodeScore) string {
	best, ties := scores[0], 1
	for _, s := range scores[1:] {
		switch {
		case s.Score > best.Score:
			best, ties = s, 1
		case s.Score == best.Score:
			ties++
			if f.rnd.IntN(ties) == 0 {
				best = s
			}
		}
	}
	return best.Name
}

// ScoreNodes runs PreFilter, Filter and the scoring phases for pod on every
// node and returns the weighted totals of the feasible ones, for tests and
// tools that want to see the ranking.
func (f *Framework) ScoreNodes(ctx context.Context, pod *PodInfo, snap *Snapshot) ([]NodeScore, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	state := NewCycleState()
	if st := f.RunPreFilter(ctx, state, pod, snap); !st.IsSuccess() {
		return nil, fmt.Errorf("framework: prefilter: %w", st.AsError())
	}
	var feasible []*NodeInfo
	for _, ni := range snap.Nodes {
		if f.RunFilters(state, pod, ni, snap).IsSuccess() {
			feasible = append(feasible, ni)
		}
	}
	if len(feasible) == 0 {
		return nil, nil
	}
	scores, err := f.prioritize(ctx, state, pod, snap, feasible)
	return append([]NodeScore(nil), scores...), err
}
