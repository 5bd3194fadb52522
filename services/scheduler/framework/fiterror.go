package framework

import (
	"fmt"
	"sort"
	"strings"
)

// NoNodeAvailableMsg starts every FitError message, with the node count.
const NoNodeAvailableMsg = "0/%v nodes are available"

// Diagnosis explains why a pod fits no node.
type Diagnosis struct {
	// NodeToStatus is each rejected node's status (the first plugin that
	// rejected it).
	NodeToStatus map[string]*Status
	// PreFilterMsg is a PreFilter rejection that applies to every node.
	PreFilterMsg string
	// PostFilterMsg is what preemption found ("preemption: ...").
	PostFilterMsg string
}

// FitError is returned when a pod fits no node. Its message is the one
// kube-scheduler puts in the PodScheduled condition and FailedScheduling
// event, e.g.
//
//	0/5 nodes are available: 2 node(s) had untolerated taint {dedicated: gpu}, 3 Insufficient cpu. preemption: 0/5 nodes are available: 5 No preemption victims found for incoming pod.
//
// (reasons counted over nodes, "<count> <reason>" sorted as strings).
type FitError struct {
	Pod         *PodInfo
	NumAllNodes int
	Diagnosis   Diagnosis
}

// Error renders the message.
func (f *FitError) Error() string {
	msg := fmt.Sprintf(NoNodeAvailableMsg+":", f.NumAllNodes)
	if f.Diagnosis.PreFilterMsg != "" {
		msg += fmt.Sprintf(" %v.", f.Diagnosis.PreFilterMsg)
	} else if hist := ReasonHistogram(f.Diagnosis.NodeToStatus, f.NumAllNodes, nil); len(hist) > 0 {
		msg += fmt.Sprintf(" %v.", strings.Join(hist, ", "))
	}
	if f.Diagnosis.PostFilterMsg != "" {
		msg += " " + f.Diagnosis.PostFilterMsg
	}
	return msg
}

// ReasonHistogram counts the reasons over nodes and renders them as
// kube-scheduler does ("3 Insufficient cpu"), sorted as strings. Nodes
// missing from statuses (up to numAllNodes) count with absent's reasons.
func ReasonHistogram(statuses map[string]*Status, numAllNodes int, absent *Status) []string {
	counts := map[string]int{}
	for _, st := range statuses {
		for _, r := range st.Reasons() {
			counts[r]++
		}
	}
	if missing := numAllNodes - len(statuses); missing > 0 {
		for _, r := range absent.Reasons() {
			counts[r] += missing
		}
	}
	out := make([]string, 0, len(counts))
	for r, n := range counts {
		out = append(out, fmt.Sprintf("%v %v", n, r))
	}
	sort.Strings(out)
	return out
}
