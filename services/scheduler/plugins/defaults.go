package plugins

import (
	fw "github.com/cairn-dev/cairn/services/scheduler/framework"
)

// Default is kube-scheduler's default plugin set for the extension points
// cairn implements, in kube's order: the filters run cheapest first and
// stop at the first rejection.
func Default() []fw.Plugin {
	return []fw.Plugin{
		NodeUnschedulable{},
		NodeName{},
		TaintToleration{},
		NodeAffinity{},
		NodePorts{},
		NodeResourcesFit{},
		PodTopologySpread{},
		InterPodAffinity{},
		BalancedAllocation{},
		&ImageLocality{},
	}
}

// DefaultWeights are kube-scheduler's default score weights.
func DefaultWeights() map[string]int64 {
	return map[string]int64{
		TaintTolerationName:    3,
		NodeAffinityName:       2,
		NodeResourcesFitName:   1,
		PodTopologySpreadName:  2,
		InterPodAffinityName:   2,
		BalancedAllocationName: 1,
		ImageLocalityName:      1,
	}
}

// NewDefaultFramework is a framework with Default plugins and weights.
func NewDefaultFramework(opts fw.Options) *fw.Framework {
	return fw.New(Default(), DefaultWeights(), opts)
}
