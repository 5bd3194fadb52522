package framework

import (
	corev1 "k8s.io/api/core/v1"
)

// Snapshot is the cluster as the scheduler sees it: every node with the
// pods counted on it, kept current incrementally (AddNode, AddPod, ...)
// rather than rebuilt per scheduling cycle. It is not safe for concurrent
// use: its owner (the scheduler's cache) holds a write lock while changing
// it and a read lock while a cycle reads it, and plugins never change it.
type Snapshot struct {
	// Nodes are the schedulable candidates: nodes that exist (Node != nil).
	Nodes  []*NodeInfo
	byName map[string]*NodeInfo
	// imageNodes counts, per normalised image, the nodes that have it.
	imageNodes map[string]int
	// nominated are pods nominated to a node by preemption, not yet bound.
	nominated map[string][]*PodInfo
	// The indexes of index.go: counted pods by label, placed pods'
	// required anti-affinity terms and scoring terms; and the interned node
	// labels of topology.go.
	pods                  podIndex
	antiTerms, scoreTerms termIndex
	topo                  topology
}

// NewSnapshot builds a snapshot from nodes and pods; pods with
// spec.nodeName are counted on their node.
func NewSnapshot(nodes []*corev1.Node, pods []*corev1.Pod) *Snapshot {
	s := &Snapshot{byName: map[string]*NodeInfo{}, imageNodes: map[string]int{}, nominated: map[string][]*PodInfo{},
		pods: newPodIndex(), antiTerms: newTermIndex(), scoreTerms: newTermIndex(), topo: newTopology()}
	for _, n := range nodes {
		s.AddNode(n)
	}
	for _, p := range pods {
		if p.Spec.NodeName != "" {
			s.AddPod(NewPodInfo(p, 0), p.Spec.NodeName)
		}
	}
	return s
}

// NodeInfo returns the node with that name (nil if unknown or deleted).
func (s *Snapshot) NodeInfo(name string) *NodeInfo {
	if ni := s.byName[name]; ni != nil && ni.Node != nil {
		return ni
	}
	return nil
}

// NumNodes is the number of nodes.
func (s *Snapshot) NumNodes() int { return len(s.Nodes) }

// ImageNodes is the number of nodes that have image (normalised).
func (s *Snapshot) ImageNodes(image string) int { return s.imageNodes[image] }

// AddNode adds or updates a node.
func (s *Snapshot) AddNode(node *corev1.Node) {
	ni := s.byName[node.Name]
	if ni == nil {
		ni = NewNodeInfo(nil)
		s.byName[node.Name] = ni
	}
	if ni.Node == nil {
		s.Nodes = append(s.Nodes, ni)
	} else {
		s.countImages(ni, -1)
		s.unsetTopology(ni)
	}
	ni.SetNode(node)
	s.countImages(ni, 1)
	s.setTopology(ni)
}

// RemoveNode removes a node. Pods still counted on it stay (on a NodeInfo
// without node, outside Nodes) until they are removed.
func (s *Snapshot) RemoveNode(name string) {
	ni := s.byName[name]
	if ni == nil || ni.Node == nil {
		return
	}
	s.countImages(ni, -1)
	s.unsetTopology(ni)
	for i, n := range s.Nodes {
		if n == ni {
			s.Nodes[i] = s.Nodes[len(s.Nodes)-1]
			s.Nodes = s.Nodes[:len(s.Nodes)-1]
			break
		}
	}
	ni.SetNode(nil)
	if len(ni.Pods) == 0 {
		delete(s.byName, name)
	}
}

// AddPod counts a pod on a node (known or not yet).
func (s *Snapshot) AddPod(pi *PodInfo, nodeName string) {
	ni := s.byName[nodeName]
	if ni == nil {
		ni = NewNodeInfo(nil)
		s.byName[nodeName] = ni
	}
	ni.AddPod(pi)
	s.indexPod(pi, ni)
}

// RemovePod stops counting a pod on a node; it reports whether it was there.
func (s *Snapshot) RemovePod(key, nodeName string) bool {
	ni := s.byName[nodeName]
	if ni == nil {
		return false
	}
	pi := ni.Pod(key)
	if pi == nil {
		return false
	}
	ni.RemovePod(key)
	s.unindexPod(pi)
	if ni.Node == nil && len(ni.Pods) == 0 {
		delete(s.byName, nodeName)
	}
	return true
}

// SetNominated records that pi waits for room on nodeName ("" clears it).
// Filters count nominated pods of equal or higher priority (see
// Framework.RunFilters).
func (s *Snapshot) SetNominated(pi *PodInfo, nodeName string) {
	for n, pods := range s.nominated {
		if i := indexOf(pods, pi.Key); i >= 0 {
			pods = removeAt(pods, i)
			if len(pods) == 0 {
				delete(s.nominated, n)
			} else {
				s.nominated[n] = pods
			}
		}
	}
	if nodeName != "" {
		s.nominated[nodeName] = append(s.nominated[nodeName], pi)
	}
}

// Nominated are the pods nominated to a node.
func (s *Snapshot) Nominated(nodeName string) []*PodInfo { return s.nominated[nodeName] }

func (s *Snapshot) countImages(ni *NodeInfo, d int) {
	for img := range ni.Images {
		if s.imageNodes[img] += d; s.imageNodes[img] <= 0 {
			delete(s.imageNodes, img)
		}
	}
}
