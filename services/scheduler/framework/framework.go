package framework

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
)

// ErrNoNodes is returned by Schedule when the cluster has no node.
var ErrNoNodes = errors.New("framework: no nodes available to schedule pods")

// Tuning of the node sampling, as kube-scheduler's percentageOfNodesToScore.
const (
	minFeasibleNodesToFind           = 100
	minFeasibleNodesPercentageToFind = 5
)

// Options tune a Framework.
type Options struct {
	// Parallelism is the number of goroutines that filter and score nodes;
	// 0 means GOMAXPROCS.
	Parallelism int
	// PercentageOfNodesToScore: filtering stops once this share of the nodes
	// (at least 100 nodes) is found feasible. 0 is adaptive, as in
	// kube-scheduler: 50% minus 1% per 125 nodes, at least 5%. 100 checks
	// every node.
	PercentageOfNodesToScore int32
	// Seed seeds the tie-break between nodes with the same score; 0 seeds
	// randomly.
	Seed uint64
}

// Framework runs plugins over a Snapshot to place one pod. Plugins run in
// the order given; a node's Filter stops at the first plugin that rejects
// it (its reasons explain the node). One Framework schedules one pod at a
// time (Schedule is not reentrant); the filter and score phases fan out
// over Options.Parallelism goroutines.
type Framework struct {
	preFilters []PreFilterPlugin
	filters    []FilterPlugin
	preScores  []PreScorePlugin
	scores     []weighted
	preBinds   []PreBindPlugin
	opts       Options

	mu        sync.Mutex
	rnd       *rand.Rand
	nextStart int
	// Scratch space of findFeasible and prioritize, reused across cycles.
	rejected []*Status
	found    []feasibleNode
	feasible []*NodeInfo
	scoreBuf []NodeScore
}

type weighted struct {
	ScorePlugin
	weight int64
}

// New builds a framework from plugins; each plugin is used at every
// extension point it implements. weights give Score plugins their weight
// (missing or 0 means 1).
func New(plugins []Plugin, weights map[string]int64, opts Options) *Framework {
	f := &Framework{opts: opts}
	if f.opts.Parallelism <= 0 {
		f.opts.Parallelism = runtime.GOMAXPROCS(0)
	}
	seed := opts.Seed
	if seed == 0 {
		seed = rand.Uint64()
	}
	f.rnd = rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	for _, p := range plugins {
		if pf, ok := p.(PreFilterPlugin); ok {
			f.preFilters = append(f.preFilters, pf)
		}
		if fp, ok := p.(FilterPlugin); ok {
			f.filters = append(f.filters, fp)
		}
		if ps, ok := p.(PreScorePlugin); ok {
			f.preScores = append(f.preScores, ps)
		}
		if pb, ok := p.(PreBindPlugin); ok {
			f.preBinds = append(f.preBinds, pb)
		}
		if sp, ok := p.(ScorePlugin); ok {
			w := weights[p.Name()]
			if w <= 0 {
				w = 1
			}
			f.scores = append(f.scores, weighted{sp, w})
		}
	}
	return f
}

// Result is where Schedule placed a pod.
type Result struct {
	// Node is the chosen node.
	Node string
	// Evaluated is the number of nodes filtered; Feasible the number that
	// passed.
	Evaluated, Feasible int
}

// Schedule picks a node for pod: PreFilter, Filter over a sample of the
// nodes (see Options.PercentageOfNodesToScore; the sample starts where the
// previous cycle stopped), then PreScore, Score, NormalizeScore, weights,
// and the highest total wins (ties broken at random). It returns a
// *FitError when no node fits, ErrNoNodes for an empty cluster, or an
// internal error. snap must not change during the call.
func (f *Framework) Schedule(ctx context.Context, pod *PodInfo, snap *Snapshot) (Result, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(snap.Nodes) == 0 {
		return Result{}, ErrNoNodes
	}
	state := NewCycleState()
	diag := Diagnosis{NodeToStatus: map[string]*Status{}}
	if st := f.RunPreFilter(ctx, state, pod, snap); !st.IsSuccess() {
		if !st.IsRejected() {
			return Result{}, fmt.Errorf("framework: prefilter %s: %w", st.Plugin(), st.AsError())
		}
		diag.PreFilterMsg = st.Message()
		for _, ni := range snap.Nodes {
			diag.NodeToStatus[ni.Name()] = st
		}
		return Result{}, &FitError{Pod: pod, NumAllNodes: len(snap.Nodes), Diagnosis: diag}
	}
	feasible, evaluated, err := f.findFeasible(ctx, state, pod, snap, &diag)
	if err != nil {
		return Result{}, err
	}
	res := Result{Evaluated: evaluated, Feasible: len(feasible)}
	switch len(feasible) {
	case 0:
		return res, &FitError{Pod: pod, NumAllNodes: len(snap.Nodes), Diagnosis: diag}
	case 1:
		res.Node = feasible[0].Name()
		return res, nil
	}
	totals, err := f.prioritize(ctx, state, pod, snap, feasible)
	if err != nil {
		return res, err
	}
	res.Node = f.selectHost(totals)
	return res, nil
}

// RunPreBind runs the PreBind plugins in order for pod on nodeName and
// returns the first failure. Unlike Schedule it may run concurrently with
// other calls (bindings run in parallel).
func (f *Framework) RunPreBind(ctx context.Context, pod *PodInfo, nodeName string) *Status {
	for _, p := range f.preBinds {
		if st := p.PreBind(ctx, pod, nodeName); !st.IsSuccess() {
			return st.WithPlugin(p.Name())
		}
	}
	return nil
}

// RunPreFilter runs every PreFilter plugin; plugins that return Skip have
// their Filter skipped in this cycle. It returns the first rejection or
// error.
func (f *Framework) RunPreFilter(ctx context.Context, state *CycleState, pod *PodInfo, snap *Snapshot) *Status {
	for _, p := range f.preFilters {
		st := p.PreFilter(ctx, state, pod, snap)
		if st.IsSkip() {
			state.skipFilter[p.Name()] = true
			continue
		}
		if !st.IsSuccess() {
			return st.WithPlugin(p.Name())
		}
	}
	state.filters = make([]FilterPlugin, 0, len(f.filters))
	for _, p := range f.filters {
		if !state.skipFilter[p.Name()] {
			state.filters = append(state.filters, p)
		}
	}
	return nil
}

// RunFilters runs the Filter plugins for pod on one node, accounting
// first for the pods nominated to that node with a priority at least
// pod's (as kube's RunFilterPluginsWithNominatedPods): the node must fit
// with them and without them.
func (f *Framework) RunFilters(state *CycleState, pod *PodInfo, ni *NodeInfo, snap *Snapshot) *Status {
	if len(snap.nominated) == 0 {
		return f.runFilterPlugins(state, pod, ni)
	}
	if nominated := snap.Nominated(ni.Name()); len(nominated) > 0 {
		withNom, withState, added := ni, state, false
		for _, np := range nominated {
			if np.Key == pod.Key || np.Priority < pod.Priority {
				continue
			}
			if !added {
				withNom, withState, added = ni.Clone(), state.Clone(), true
			}
			withNom.AddPod(np)
			if st := f.RunAddPod(withState, pod, np, withNom); !st.IsSuccess() {
				return st
			}
		}
		if added {
			if st := f.runFilterPlugins(withState, pod, withNom); !st.IsSuccess() {
				return st
			}
		}
	}
	return f.runFilterPlugins(state, pod, ni)
}

func (f *Framework) runFilterPlugins(state *CycleState, pod *PodInfo, ni *NodeInfo) *Status {
	filters := state.filters
	if filters == nil {
		filters = f.filters
	}
	for _, p := range filters {
		if st := p.Filter(state, pod, ni); !st.IsSuccess() {
			return st.WithPlugin(p.Name())
		}
	}
	return nil
}

// RunAddPod tells the PreFilter plugins' state that add now runs on node.
func (f *Framework) RunAddPod(state *CycleState, pod, add *PodInfo, ni *NodeInfo) *Status {
	for _, p := range f.preFilters {
		if ext, ok := p.(PreFilterExtensions); ok && !state.skipFilter[p.Name()] {
			if st := ext.AddPod(state, pod, add, ni); !st.IsSuccess() {
				return st.WithPlugin(p.Name())
			}
		}
	}
	return nil
}

// RunRemovePod tells the PreFilter plugins' state that remove no longer
// runs on node.
func (f *Framework) RunRemovePod(state *CycleState, pod, remove *PodInfo, ni *NodeInfo) *Status {
	for _, p := range f.preFilters {
		if ext, ok := p.(PreFilterExtensions); ok && !state.skipFilter[p.Name()] {
			if st := ext.RemovePod(state, pod, remove, ni); !st.IsSuccess() {
				return st.WithPlugin(p.Name())
			}
		}
	}
	return nil
}

// NumFeasibleNodesToFind is how many feasible nodes filtering looks for in
// a cluster of n nodes before it stops.
func (f *Framework) NumFeasibleNodesToFind(n int) int {
	if n < minFeasibleNodesToFind || f.opts.PercentageOfNodesToScore >= 100 {
		return n
	}
	pct := int(f.opts.PercentageOfNodesToScore)
	if pct <= 0 {
		pct = max(50-n/125, minFeasibleNodesPercentageToFind)
	}
	return max(n*pct/100, minFeasibleNodesToFind)
}

// filterChunk is how many nodes a filtering worker takes at a time.
const filterChunk = 8

type feasibleNode struct {
	pos int
	ni  *NodeInfo
}

// findFeasible filters nodes from f.nextStart on, in parallel, until it
// has found NumFeasibleNodesToFind or checked every node. Rejections are
// kept per node position and go into diag only when no node fits (the
// only case anyone reads them).
func (f *Framework) findFeasible(ctx context.Context, state *CycleState, pod *PodInfo, snap *Snapshot, diag *Diagnosis) ([]*NodeInfo, int, error) {
	n := len(snap.Nodes)
	want := int32(f.NumFeasibleNodesToFind(n))
	start := f.nextStart % n
	if cap(f.found) < int(want) {
		f.found = make([]feasibleNode, want)
	}
	found := f.found[:want]
	if cap(f.rejected) < n {
		f.rejected = make([]*Status, n)
	}
	rejected := f.rejected[:n]
	defer clear(rejected)
	var count, next, processed atomic.Int32
	var mu sync.Mutex
	var firstErr error
	worker := func() {
		done := int32(0)
		defer func() { processed.Add(done) }()
		// Nodes are taken, and feasible ones recorded, filterChunk at a
		// time: an atomic add per node costs more than a cheap filter when
		// workers contend for it.
		var fit [filterChunk]feasibleNode
		for ctx.Err() == nil && count.Load() < want {
			lo := int(next.Add(filterChunk)) - filterChunk
			k := 0
			for i := lo; i < min(lo+filterChunk, n); i++ {
				ni := snap.Nodes[(start+i)%n]
				st := f.RunFilters(state, pod, ni, snap)
				done++
				if st.IsSuccess() {
					fit[k] = feasibleNode{pos: i, ni: ni}
					k++
					continue
				}
				rejected[i] = st
				if st.Code() == Error {
					mu.Lock()
					if firstErr == nil {
						firstErr = fmt.Errorf("framework: filter %s on %s: %w", st.Plugin(), ni.Name(), st.AsError())
					}
					mu.Unlock()
				}
			}
			if k > 0 {
				end := count.Add(int32(k))
				for j := end - int32(k); j < min(end, want); j++ {
					found[j] = fit[j-(end-int32(k))]
				}
			}
			if lo+filterChunk >= n {
				return
			}
		}
	}
	parallel(f.opts.Parallelism, n, worker)
	if err := ctx.Err(); err != nil {
		return nil, 0, fmt.Errorf("framework: filter: %w", err)
	}
	if firstErr != nil {
		return nil, 0, firstErr
	}
	f.nextStart = (start + int(processed.Load())) % n
	out := found[:min(count.Load(), want)]
	if len(out) == 0 {
		for i, st := range rejected {
			if st != nil {
				diag.NodeToStatus[snap.Nodes[(start+i)%n].Name()] = st
			}
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a].pos < out[b].pos })
	nodes := f.feasible[:0]
	for _, fn := range out {
		nodes = append(nodes, fn.ni)
	}
	f.feasible = nodes
	clear(out)
	return nodes, int(processed.Load()), nil
}

// parallel runs worker on min(p, n) goroutines and waits for them.
func parallel(p, n int, worker func()) {
	p = min(p, max(n/8, 1))
	if p <= 1 {
		worker()
		return
	}
	var wg sync.WaitGroup
	for range p {
		wg.Go(worker)
	}
	wg.Wait()
}
