package plugins

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	fw "github.com/cairn-dev/cairn/services/scheduler/framework"
)

// Plugin names, as in kube-scheduler's configuration.
const (
	NodeNameName          = "NodeName"
	NodeUnschedulableName = "NodeUnschedulable"
	NodePortsName         = "NodePorts"
	TaintTolerationName   = "TaintToleration"
	NodeAffinityName      = "NodeAffinity"
)

// Reasons, worded exactly as kube-scheduler's.
const (
	ErrReasonNodeName          = "node(s) didn't match the requested node name"
	ErrReasonUnschedulable     = "node(s) were unschedulable"
	ErrReasonNodePorts         = "node(s) didn't have free ports for the requested pod ports"
	ErrReasonNodeAffinity      = "node(s) didn't match Pod's node affinity/selector"
	errReasonUntoleratedFormat = "node(s) had untolerated taint {%s: %s}"
)

// Shared rejections, tagged with their plugin (see fw.Status.WithPlugin):
// a Filter returns one of these rather than allocating a status per
// rejected node.
var (
	statusNodeName      = fw.NewStatus(fw.UnschedulableAndUnresolvable, ErrReasonNodeName).WithPlugin(NodeNameName)
	statusUnschedulable = fw.NewStatus(fw.UnschedulableAndUnresolvable, ErrReasonUnschedulable).WithPlugin(NodeUnschedulableName)
	statusNodePorts     = fw.NewStatus(fw.Unschedulable, ErrReasonNodePorts).WithPlugin(NodePortsName)
	statusNodeAffinity  = fw.NewStatus(fw.UnschedulableAndUnresolvable, ErrReasonNodeAffinity).WithPlugin(NodeAffinityName)
)

// NodeName rejects nodes other than spec.nodeName when it is set.
type NodeName struct{}

var _ fw.FilterPlugin = NodeName{}

func (NodeName) Name() string { return NodeNameName }

func (NodeName) Filter(_ *fw.CycleState, pod *fw.PodInfo, ni *fw.NodeInfo) *fw.Status {
	if n := pod.Pod.Spec.NodeName; n != "" && n != ni.Name() {
		return statusNodeName
	}
	return nil
}

// NodeUnschedulable rejects cordoned nodes (spec.unschedulable) unless the
// pod tolerates the node.kubernetes.io/unschedulable:NoSchedule taint.
type NodeUnschedulable struct{}

var _ fw.FilterPlugin = NodeUnschedulable{}

func (NodeUnschedulable) Name() string { return NodeUnschedulableName }

var unschedulableTaint = corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}

func (NodeUnschedulable) Filter(_ *fw.CycleState, pod *fw.PodInfo, ni *fw.NodeInfo) *fw.Status {
	if ni.Node.Spec.Unschedulable && !tolerates(pod.Pod.Spec.Tolerations, &unschedulableTaint) {
		return statusUnschedulable
	}
	return nil
}

// NodePorts rejects nodes where a host port the pod wants is taken (same
// protocol and port, and the same IP or either one 0.0.0.0).
type NodePorts struct{}

var _ fw.FilterPlugin = NodePorts{}

func (NodePorts) Name() string { return NodePortsName }

func (NodePorts) Filter(_ *fw.CycleState, pod *fw.PodInfo, ni *fw.NodeInfo) *fw.Status {
	for _, want := range pod.HostPorts {
		for used := range ni.UsedPorts {
			if used.Port == want.Port && used.Protocol == want.Protocol &&
				(used.IP == want.IP || used.IP == "0.0.0.0" || want.IP == "0.0.0.0") {
				return statusNodePorts
			}
		}
	}
	return nil
}

// TaintToleration filters out nodes with a NoSchedule or NoExecute taint
// the pod does not tolerate, and scores nodes by how few PreferNoSchedule
// taints the pod does not tolerate.
type TaintToleration struct{}

var (
	_ fw.FilterPlugin    = TaintToleration{}
	_ fw.ScorePlugin     = TaintToleration{}
	_ fw.ScoreNormalizer = TaintToleration{}
)

func (TaintToleration) Name() string { return TaintTolerationName }

func (TaintToleration) Filter(_ *fw.CycleState, pod *fw.PodInfo, ni *fw.NodeInfo) *fw.Status {
	for i := range ni.Node.Spec.Taints {
		t := &ni.Node.Spec.Taints[i]
		if t.Effect != corev1.TaintEffectNoSchedule && t.Effect != corev1.TaintEffectNoExecute {
			continue
		}
		if !tolerates(pod.Pod.Spec.Tolerations, t) {
			return fw.NewStatus(fw.UnschedulableAndUnresolvable, fmt.Sprintf(errReasonUntoleratedFormat, t.Key, t.Value))
		}
	}
	return nil
}

// Score counts the PreferNoSchedule taints not tolerated by a toleration
// with effect PreferNoSchedule or empty; NormalizeScore reverses it.
func (TaintToleration) Score(_ *fw.CycleState, pod *fw.PodInfo, ni *fw.NodeInfo) (int64, *fw.Status) {
	var n int64
	for i := range ni.Node.Spec.Taints {
		t := &ni.Node.Spec.Taints[i]
		if t.Effect != corev1.TaintEffectPreferNoSchedule {
			continue
		}
		var tols []corev1.Toleration
		for _, tol := range pod.Pod.Spec.Tolerations {
			if tol.Effect == "" || tol.Effect == corev1.TaintEffectPreferNoSchedule {
				tols = append(tols, tol)
			}
		}
		if !tolerates(tols, t) {
			n++
		}
	}
	return n, nil
}

func (TaintToleration) NormalizeScore(_ *fw.CycleState, _ *fw.PodInfo, scores []fw.NodeScore) *fw.Status {
	fw.DefaultNormalizeScore(fw.MaxNodeScore, true, scores)
	return nil
}

// NodeAffinity filters nodes by the pod's nodeSelector and required node
// affinity and scores them by the summed weights of the preferred terms
// they match.
type NodeAffinity struct{}

var (
	_ fw.PreFilterPlugin = NodeAffinity{}
	_ fw.FilterPlugin    = NodeAffinity{}
	_ fw.PreScorePlugin  = NodeAffinity{}
	_ fw.ScorePlugin     = NodeAffinity{}
	_ fw.ScoreNormalizer = NodeAffinity{}
)

func (NodeAffinity) Name() string { return NodeAffinityName }

type nodeAffinityState struct{ required requiredNodeAffinity }

func (s *nodeAffinityState) Clone() fw.StateData { return s }

type preferredTerm struct {
	term   nodeSelectorTerm
	weight int64
}

type nodeAffinityScoreState struct{ preferred []preferredTerm }

func (s *nodeAffinityScoreState) Clone() fw.StateData { return s }

func (NodeAffinity) PreFilter(_ context.Context, state *fw.CycleState, pod *fw.PodInfo, _ *fw.Snapshot) *fw.Status {
	req, err := compileRequired(pod.Pod)
	if err != nil {
		return fw.NewStatus(fw.UnschedulableAndUnresolvable, err.Error())
	}
	if req.selector == nil && req.terms == nil {
		return fw.NewStatus(fw.Skip)
	}
	state.Write(NodeAffinityName, &nodeAffinityState{required: req})
	return nil
}

func (NodeAffinity) Filter(state *fw.CycleState, _ *fw.PodInfo, ni *fw.NodeInfo) *fw.Status {
	s, ok := state.Read(NodeAffinityName).(*nodeAffinityState)
	if !ok {
		return fw.AsStatus(fmt.Errorf("plugins: %s: no prefilter state", NodeAffinityName))
	}
	if !s.required.Match(ni.Node) {
		return statusNodeAffinity
	}
	return nil
}

func (NodeAffinity) PreScore(_ context.Context, state *fw.CycleState, pod *fw.PodInfo, _ *fw.Snapshot, _ []*fw.NodeInfo) *fw.Status {
	a := pod.Pod.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || len(a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution) == 0 {
		return fw.NewStatus(fw.Skip)
	}
	s := &nodeAffinityScoreState{}
	for _, p := range a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
		if p.Weight == 0 {
			continue
		}
		t, err := compileTerm(&p.Preference)
		if err != nil {
			return fw.AsStatus(err)
		}
		s.preferred = append(s.preferred, preferredTerm{term: t, weight: int64(p.Weight)})
	}
	state.Write(NodeAffinityName+"/score", s)
	return nil
}

func (NodeAffinity) Score(state *fw.CycleState, _ *fw.PodInfo, ni *fw.NodeInfo) (int64, *fw.Status) {
	s, _ := state.Read(NodeAffinityName + "/score").(*nodeAffinityScoreState)
	if s == nil {
		return 0, nil
	}
	var sum int64
	for i := range s.preferred {
		if s.preferred[i].term.match(ni.Node) {
			sum += s.preferred[i].weight
		}
	}
	return sum, nil
}

func (NodeAffinity) NormalizeScore(_ *fw.CycleState, _ *fw.PodInfo, scores []fw.NodeScore) *fw.Status {
	fw.DefaultNormalizeScore(fw.MaxNodeScore, false, scores)
	return nil
}
