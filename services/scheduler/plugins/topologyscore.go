package plugins

import (
	"context"
	"math"

	corev1 "k8s.io/api/core/v1"

	fw "github.com/cairn-dev/cairn/services/scheduler/framework"
)

type spreadScoreState struct {
	constraints []constraint
	// counts[i] maps value ids of constraint i's key to matching pods.
	counts []map[int32]int64
	// weights[i] is log(domains of constraint i among feasible nodes + 2).
	weights []float64
	// ignored are feasible nodes missing a topology key.
	ignored map[string]bool
}

func (s *spreadScoreState) Clone() fw.StateData { return s }

// PreScore counts matching pods per domain for the ScheduleAnyway
// constraints, over every eligible node (visiting only matching pods).
func (PodTopologySpread) PreScore(_ context.Context, state *fw.CycleState, pod *fw.PodInfo, snap *fw.Snapshot, feasible []*fw.NodeInfo) *fw.Status {
	cs, err := compileConstraints(pod.Pod, corev1.ScheduleAnyway)
	if err != nil {
		return fw.AsStatus(err)
	}
	if len(cs) == 0 {
		return fw.NewStatus(fw.Skip)
	}
	req, err := compileRequired(pod.Pod)
	if err != nil {
		return fw.AsStatus(err)
	}
	resolve(snap, cs)
	s := &spreadScoreState{constraints: cs, counts: countPods(snap, &req, cs), weights: make([]float64, len(cs)), ignored: map[string]bool{}}
	domains := make([]map[int32]struct{}, len(cs))
	for i := range domains {
		domains[i] = map[int32]struct{}{}
	}
	for _, ni := range feasible {
		if !hasAllKeys(ni, cs) {
			s.ignored[ni.Name()] = true
			continue
		}
		for i, c := range cs {
			domains[i][ni.TopologyValue(c.keyID)] = struct{}{}
		}
	}
	for i := range cs {
		s.weights[i] = math.Log(float64(len(domains[i]) + 2))
	}
	state.Write(PodTopologySpreadName+"/score", s)
	return nil
}

// Score is, over the constraints, count * weight + (maxSkew - 1): lower is
// better until NormalizeScore reverses it.
func (PodTopologySpread) Score(state *fw.CycleState, _ *fw.PodInfo, ni *fw.NodeInfo) (int64, *fw.Status) {
	s, _ := state.Read(PodTopologySpreadName + "/score").(*spreadScoreState)
	if s == nil || s.ignored[ni.Name()] {
		return 0, nil
	}
	var score float64
	for i, c := range s.constraints {
		v := ni.TopologyValue(c.keyID)
		score += float64(s.counts[i][v])*s.weights[i] + float64(c.maxSkew-1)
	}
	return int64(math.Round(score)), nil
}

// NormalizeScore: 100 * (max + min - score) / max; ignored nodes score 0.
func (PodTopologySpread) NormalizeScore(state *fw.CycleState, _ *fw.PodInfo, scores []fw.NodeScore) *fw.Status {
	s, _ := state.Read(PodTopologySpreadName + "/score").(*spreadScoreState)
	if s == nil {
		return nil
	}
	lo, hi := int64(math.MaxInt64), int64(0)
	for _, sc := range scores {
		if s.ignored[sc.Name] {
			continue
		}
		lo, hi = min(lo, sc.Score), max(hi, sc.Score)
	}
	for i := range scores {
		switch {
		case s.ignored[scores[i].Name]:
			scores[i].Score = 0
		case hi == 0:
			scores[i].Score = fw.MaxNodeScore
		default:
			scores[i].Score = fw.MaxNodeScore * (hi + lo - scores[i].Score) / hi
		}
	}
	return nil
}
