package preemption

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	fw "github.com/cairn-dev/cairn/services/scheduler/framework"
)

// Messages, worded as kube-scheduler's DefaultPreemption.
const (
	MsgNoVictims              = "No preemption victims found for incoming pod"
	MsgNotHelpful             = "Preemption is not helpful for scheduling"
	MsgPolicyNever            = "not eligible due to preemptionPolicy=Never."
	MsgTerminatingOnNominated = "not eligible due to a terminating pod on the nominated node."
	// Prefix starts every PostFilter message of preemption.
	Prefix = "preemption: "
)

// Candidate is a node where evicting Victims makes the pod fit.
type Candidate struct {
	Node    string
	Victims []*fw.PodInfo
}

// Result is preemption's outcome: a Candidate, or none and Message, the
// text that goes after the FitError's filter reasons ("preemption: 0/5
// nodes are available: 5 No preemption victims found for incoming pod.").
type Result struct {
	Candidate *Candidate
	Message   string
}

// Preempt looks for the node where evicting pods of strictly lower
// priority than pod lets it fit, given the Diagnosis of the cycle that
// found no node. Only nodes that rejected the pod as Unschedulable (not
// UnschedulableAndUnresolvable) are tried. On each, every lower-priority
// pod is removed; if the pod then fits, the removed pods are added back,
// most important first, as long as it still fits; those that cannot come
// back are the victims. Among candidates it picks, like kube-scheduler:
// the lowest highest-victim priority, then the lowest sum of victim
// priorities, then the fewest victims, then the node name. snap must not
// change during the call (hold the cache's read lock); it is not modified.
func Preempt(ctx context.Context, f *fw.Framework, pod *fw.PodInfo, snap *fw.Snapshot, diag fw.Diagnosis) Result {
	if msg, ok := eligible(pod, snap); !ok {
		return Result{Message: Prefix + msg}
	}
	state := fw.NewCycleState()
	if st := f.RunPreFilter(ctx, state, pod, snap); !st.IsSuccess() {
		return Result{Message: Prefix + notHelpful(len(snap.Nodes))}
	}
	statuses := map[string]*fw.Status{}
	var cands []Candidate
	for _, ni := range snap.Nodes {
		if ctx.Err() != nil {
			break
		}
		if diag.NodeToStatus[ni.Name()].Code() != fw.Unschedulable {
			continue
		}
		victims, st := selectVictims(f, state, pod, ni, snap)
		if !st.IsSuccess() {
			statuses[ni.Name()] = st
			continue
		}
		cands = append(cands, Candidate{Node: ni.Name(), Victims: victims})
	}
	if len(cands) == 0 {
		return Result{Message: Prefix + fitMessage(statuses, len(snap.Nodes))}
	}
	best := pick(cands)
	return Result{Candidate: &best}
}

func notHelpful(n int) string { return fitMessage(nil, n) }

// fitMessage renders preemption's FitError: nodes not tried count as "not
// helpful".
func fitMessage(statuses map[string]*fw.Status, n int) string {
	hist := fw.ReasonHistogram(statuses, n, fw.NewStatus(fw.UnschedulableAndUnresolvable, MsgNotHelpful))
	return fmt.Sprintf(fw.NoNodeAvailableMsg+": %s.", n, strings.Join(hist, ", "))
}

// eligible is kube's PodEligibleToPreemptOthers: not with preemptionPolicy
// Never, and not while lower-priority pods on the node it was already
// nominated to are still terminating (their room is coming).
func eligible(pod *fw.PodInfo, snap *fw.Snapshot) (string, bool) {
	if p := pod.Pod.Spec.PreemptionPolicy; p != nil && *p == corev1.PreemptNever {
		return MsgPolicyNever, false
	}
	if nom := pod.Pod.Status.NominatedNodeName; nom != "" {
		if ni := snap.NodeInfo(nom); ni != nil {
			for _, p := range ni.Pods {
				if p.Pod.DeletionTimestamp != nil && p.Priority < pod.Priority {
					return MsgTerminatingOnNominated, false
				}
			}
		}
	}
	return "", true
}

// selectVictims finds the fewest pods to evict from ni, on clones.
func selectVictims(f *fw.Framework, base *fw.CycleState, pod *fw.PodInfo, orig *fw.NodeInfo, snap *fw.Snapshot) ([]*fw.PodInfo, *fw.Status) {
	ni, state := orig.Clone(), base.Clone()
	var potential []*fw.PodInfo
	for _, p := range orig.Pods {
		if p.Priority < pod.Priority && p.Pod.DeletionTimestamp == nil {
			potential = append(potential, p)
		}
	}
	if len(potential) == 0 {
		return nil, fw.NewStatus(fw.UnschedulableAndUnresolvable, MsgNoVictims)
	}
	for _, p := range potential {
		ni.RemovePod(p.Key)
		if st := f.RunRemovePod(state, pod, p, ni); !st.IsSuccess() {
			return nil, st
		}
	}
	if st := f.RunFilters(state, pod, ni, snap); !st.IsSuccess() {
		return nil, st
	}
	// Most important first: higher priority, then older.
	sort.SliceStable(potential, func(i, j int) bool {
		a, b := potential[i], potential[j]
		if a.Priority != b.Priority {
			return a.Priority > b.Priority
		}
		return a.Pod.CreationTimestamp.Before(&b.Pod.CreationTimestamp)
	})
	var victims []*fw.PodInfo
	for _, p := range potential {
		ni.AddPod(p)
		if st := f.RunAddPod(state, pod, p, ni); !st.IsSuccess() {
			return nil, st
		}
		if f.RunFilters(state, pod, ni, snap).IsSuccess() {
			continue // reprieved
		}
		ni.RemovePod(p.Key)
		if st := f.RunRemovePod(state, pod, p, ni); !st.IsSuccess() {
			return nil, st
		}
		victims = append(victims, p)
	}
	if len(victims) == 0 {
		return nil, fw.NewStatus(fw.UnschedulableAndUnresolvable, MsgNoVictims)
	}
	return victims, nil
}

func pick(cands []Candidate) Candidate {
	type rank struct {
		highest int32
		sum     int64
		n       int
	}
	rankOf := func(c Candidate) rank {
		r := rank{highest: math.MinInt32, n: len(c.Victims)}
		for _, v := range c.Victims {
			r.highest = max(r.highest, v.Priority)
			// Shifted so that negative priorities still add up sensibly.
			r.sum += int64(v.Priority) + math.MaxInt32 + 1
		}
		return r
	}
	sort.SliceStable(cands, func(i, j int) bool {
		a, b := rankOf(cands[i]), rankOf(cands[j])
		switch {
		case a.highest != b.highest:
			return a.highest < b.highest
		case a.sum != b.sum:
			return a.sum < b.sum
		case a.n != b.n:
			return a.n < b.n
		}
		return cands[i].Node < cands[j].Node
	})
	return cands[0]
}
