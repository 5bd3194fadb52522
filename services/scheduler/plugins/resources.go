package plugins

import (
	"context"
	"math"

	corev1 "k8s.io/api/core/v1"

	"github.com/cairn-dev/cairn/schemas/fit"
	fw "github.com/cairn-dev/cairn/services/scheduler/framework"
)

// Plugin names.
const (
	NodeResourcesFitName   = "NodeResourcesFit"
	BalancedAllocationName = "NodeResourcesBalancedAllocation"
	ImageLocalityName      = "ImageLocality"
)

// NodeResourcesFit filters out nodes whose allocatable cpu, memory,
// ephemeral-storage or pod count cannot take the pod's requests on top of
// the pods counted on them (fit.Check: the rule the apiserver's binding
// check applies too; a node whose allocatable lists no pods takes none),
// and scores nodes by the LeastAllocated strategy (kube's default): the
// mean free fraction of cpu and memory after placing the pod, counted
// with the non-zero defaults.
type NodeResourcesFit struct{}

var (
	_ fw.FilterPlugin = NodeResourcesFit{}
	_ fw.ScorePlugin  = NodeResourcesFit{}
)

func (NodeResourcesFit) Name() string { return NodeResourcesFitName }

// Filter reports every resource that does not fit, each as its own reason
// (so "0/3 nodes are available: 3 Insufficient cpu, 3 Insufficient memory").
func (NodeResourcesFit) Filter(_ *fw.CycleState, pod *fw.PodInfo, ni *fw.NodeInfo) *fw.Status {
	return insufficient[fit.Check(pod.Requests, fit.Node{Allocatable: ni.Allocatable, Requested: ni.Requested, Pods: len(ni.Pods)})]
}

// insufficient[m] is the shared rejection for the misfit m (nil for 0), so
// that filtering allocates nothing.
var insufficient = func() (out [fit.Misfits]*fw.Status) {
	for m := fit.Misfit(1); m < fit.Misfits; m++ {
		out[m] = fw.NewStatus(fw.Unschedulable, m.Reasons()...).WithPlugin(NodeResourcesFitName)
	}
	return out
}()

// Score is LeastAllocated over cpu and memory (weight 1 each).
func (NodeResourcesFit) Score(_ *fw.CycleState, pod *fw.PodInfo, ni *fw.NodeInfo) (int64, *fw.Status) {
	cpu := leastAllocated(ni.NonZeroRequested.MilliCPU+pod.NonZero.MilliCPU, ni.Allocatable.MilliCPU)
	mem := leastAllocated(ni.NonZeroRequested.Memory+pod.NonZero.Memory, ni.Allocatable.Memory)
	return (cpu + mem) / 2, nil
}

func leastAllocated(requested, capacity int64) int64 {
	if capacity == 0 || requested > capacity {
		return 0
	}
	return (capacity - requested) * fw.MaxNodeScore / capacity
}

// BalancedAllocation favours nodes whose cpu and memory would be used in
// equal proportions after placing the pod: score = (1 - std dev of the
// used fractions) * 100, with the pods' actual requests.
type BalancedAllocation struct{}

var _ fw.ScorePlugin = BalancedAllocation{}

func (BalancedAllocation) Name() string { return BalancedAllocationName }

func (BalancedAllocation) Score(_ *fw.CycleState, pod *fw.PodInfo, ni *fw.NodeInfo) (int64, *fw.Status) {
	cpu := fraction(ni.Requested.MilliCPU+pod.Requests.MilliCPU, ni.Allocatable.MilliCPU)
	mem := fraction(ni.Requested.Memory+pod.Requests.Memory, ni.Allocatable.Memory)
	// The standard deviation of two values is half their distance.
	std := math.Abs(cpu-mem) / 2
	return int64((1 - std) * float64(fw.MaxNodeScore)), nil
}

func fraction(requested, capacity int64) float64 {
	if capacity == 0 {
		return 1
	}
	return min(float64(requested)/float64(capacity), 1)
}

// ImageLocality favours nodes that already have the pod's images, scaled
// by how widely each image is spread over the cluster (so it does not pile
// pods onto the few nodes with a rare image). Images under 23 MiB count as
// absent; the score saturates at 1000 MiB per container.
type ImageLocality struct{}

var (
	_ fw.PreScorePlugin = (*ImageLocality)(nil)
	_ fw.ScorePlugin    = (*ImageLocality)(nil)
)

const (
	mib                   = 1024 * 1024
	minImageThreshold     = 23 * mib
	maxContainerThreshold = 1000 * mib
)

func (*ImageLocality) Name() string { return ImageLocalityName }

type imageState struct {
	images    []string
	numNodes  int
	spreadOf  map[string]int
	threshold int64
}

func (s *imageState) Clone() fw.StateData { return s }

func (*ImageLocality) PreScore(_ context.Context, state *fw.CycleState, pod *fw.PodInfo, snap *fw.Snapshot, _ []*fw.NodeInfo) *fw.Status {
	s := &imageState{numNodes: snap.NumNodes(), spreadOf: map[string]int{}}
	add := func(cs []corev1.Container) {
		for _, c := range cs {
			img := fw.NormalizeImage(c.Image)
			s.images = append(s.images, img)
			s.spreadOf[img] = snap.ImageNodes(img)
		}
	}
	add(pod.Pod.Spec.InitContainers)
	add(pod.Pod.Spec.Containers)
	any := false
	for _, n := range s.spreadOf {
		any = any || n > 0
	}
	if !any {
		return fw.NewStatus(fw.Skip)
	}
	s.threshold = maxContainerThreshold * int64(len(s.images))
	state.Write(ImageLocalityName, s)
	return nil
}

func (*ImageLocality) Score(state *fw.CycleState, _ *fw.PodInfo, ni *fw.NodeInfo) (int64, *fw.Status) {
	s, _ := state.Read(ImageLocalityName).(*imageState)
	if s == nil || s.numNodes == 0 {
		return 0, nil
	}
	var sum int64
	for _, img := range s.images {
		if size, ok := ni.Images[img]; ok {
			sum += int64(float64(size) * float64(s.spreadOf[img]) / float64(s.numNodes))
		}
	}
	sum = min(max(sum, minImageThreshold), s.threshold)
	return fw.MaxNodeScore * (sum - minImageThreshold) / (s.threshold - minImageThreshold), nil
}
