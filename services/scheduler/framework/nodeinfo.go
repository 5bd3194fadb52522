package framework

import (
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/cairn-dev/cairn/schemas/fit"
)

// NodeInfo is a node and the pods the scheduler counts on it: bound pods
// and pods it assumed (decided, binding in flight). It aggregates what the
// plugins read: requested resources, host ports in use and images present.
// A NodeInfo is not safe for concurrent mutation; the owner of the Snapshot
// serialises writes against reads.
type NodeInfo struct {
	// Node is nil for a node that was deleted but still has pods, or whose
	// pods were seen before the node.
	Node *corev1.Node
	Pods []*PodInfo

	// Requested is the sum of the pods' requests; NonZeroRequested the same
	// with the scoring defaults. Allocatable is the node's
	// (fit.NodeAllocatable: no "pods" there means no pod fits).
	Requested, NonZeroRequested fit.Resources
	Allocatable                 fit.Allocatable
	// UsedPorts are the host ports in use.
	UsedPorts map[HostPort]int
	// Images maps a normalised image name to its size on the node.
	Images map[string]int64
	// Generation increases with every change.
	Generation int64

	// topo are the interned values of the node's labels, by key id (see
	// topology.go); set by the Snapshot.
	topo []int32
}

// NewNodeInfo returns a NodeInfo for node (which may be nil) with pods.
func NewNodeInfo(node *corev1.Node, pods ...*PodInfo) *NodeInfo {
	ni := &NodeInfo{UsedPorts: map[HostPort]int{}}
	ni.SetNode(node)
	for _, p := range pods {
		ni.AddPod(p)
	}
	return ni
}

// Name is the node's name ("" if Node is nil).
func (ni *NodeInfo) Name() string {
	if ni.Node == nil {
		return ""
	}
	return ni.Node.Name
}

// SetNode sets (or replaces) the node object.
func (ni *NodeInfo) SetNode(node *corev1.Node) {
	ni.Node = node
	ni.Generation++
	ni.Allocatable = fit.Allocatable{}
	ni.Images = nil
	if node == nil {
		return
	}
	ni.Allocatable = fit.NodeAllocatable(node.Status.Allocatable)
	if len(node.Status.Images) > 0 {
		ni.Images = make(map[string]int64, len(node.Status.Images))
		for _, img := range node.Status.Images {
			for _, name := range img.Names {
				ni.Images[NormalizeImage(name)] = img.SizeBytes
			}
		}
	}
}

// AddPod counts pod on the node.
func (ni *NodeInfo) AddPod(pi *PodInfo) {
	ni.Pods = append(ni.Pods, pi)
	ni.Requested = ni.Requested.Add(pi.Requests)
	ni.NonZeroRequested = ni.NonZeroRequested.Add(pi.NonZero)
	for _, hp := range pi.HostPorts {
		ni.UsedPorts[hp]++
	}
	ni.Generation++
}

// RemovePod stops counting the pod with that key; it reports whether the
// pod was there.
func (ni *NodeInfo) RemovePod(key string) bool {
	i := indexOf(ni.Pods, key)
	if i < 0 {
		return false
	}
	pi := ni.Pods[i]
	ni.Pods = removeAt(ni.Pods, i)
	ni.Requested = ni.Requested.Sub(pi.Requests)
	ni.NonZeroRequested = ni.NonZeroRequested.Sub(pi.NonZero)
	for _, hp := range pi.HostPorts {
		if ni.UsedPorts[hp]--; ni.UsedPorts[hp] <= 0 {
			delete(ni.UsedPorts, hp)
		}
	}
	ni.Generation++
	return true
}

// Pod returns the counted pod with that key.
func (ni *NodeInfo) Pod(key string) *PodInfo {
	if i := indexOf(ni.Pods, key); i >= 0 {
		return ni.Pods[i]
	}
	return nil
}

// Clone returns a copy that can be changed without touching ni (the pods
// themselves are shared: they are immutable).
func (ni *NodeInfo) Clone() *NodeInfo {
	c := &NodeInfo{
		Node:             ni.Node,
		Pods:             append([]*PodInfo(nil), ni.Pods...),
		Requested:        ni.Requested,
		NonZeroRequested: ni.NonZeroRequested,
		Allocatable:      ni.Allocatable,
		UsedPorts:        make(map[HostPort]int, len(ni.UsedPorts)),
		Images:           ni.Images,
		Generation:       ni.Generation,
		topo:             ni.topo,
	}
	for k, v := range ni.UsedPorts {
		c.UsedPorts[k] = v
	}
	return c
}

func indexOf(pods []*PodInfo, key string) int {
	for i, p := range pods {
		if p.Key == key {
			return i
		}
	}
	return -1
}

func removeAt(pods []*PodInfo, i int) []*PodInfo {
	last := len(pods) - 1
	pods[i] = pods[last]
	pods[last] = nil
	return pods[:last]
}

// NormalizeImage adds ":latest" to an image name with neither tag nor
// digest, as the kubelet reports images.
func NormalizeImage(name string) string {
	if strings.Contains(name, "@") {
		return name
	}
	if i := strings.LastIndex(name, ":"); i > strings.LastIndex(name, "/") {
		return name
	}
	return name + ":latest"
}
