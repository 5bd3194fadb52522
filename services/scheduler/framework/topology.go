package framework

import (
	corev1 "k8s.io/api/core/v1"
)

// Topology domains as small integers. The plugins that count pods per
// topology domain (inter-pod affinity, topology spread) look up, for every
// node they filter, the node's value of a label key; through the node's
// label map that is several cache misses and a string hash per node. The
// Snapshot therefore interns the label keys and values of its nodes: a key
// has an id (TopologyKey), each of its values an id, and every node keeps
// the value id of each key (NodeInfo.TopologyValue, -1 when the node lacks
// the label), so a domain is a pair of int32 and a lookup is an index.
//
// Ids are valid while the snapshot does not change (within a scheduling
// cycle, under the owner's read lock). Values no node carries any more keep
// their id until they outnumber the live ones; then every id is reassigned.

// DomainID is a topology domain: a label key and one of its values.
type DomainID struct{ Key, Value int32 }

type topology struct {
	keys map[string]int32
	// values[k] maps the values of key k to their ids; nodes[k][v] counts
	// the existing nodes with value v of key k.
	values []map[string]int32
	nodes  [][]int32
	// dead counts value ids no node carries.
	dead int
}

func newTopology() topology { return topology{keys: map[string]int32{}} }

// TopologyKey returns the id of a node label key; false when no node has
// ever carried it (then no node has it).
func (s *Snapshot) TopologyKey(key string) (int32, bool) {
	k, ok := s.topo.keys[key]
	return k, ok
}

// TopologyDomains returns, for key id k, the number of existing nodes per
// value id (index): a value is a domain when its count is positive. The
// slice belongs to the snapshot: read it only while the snapshot does not
// change.
func (s *Snapshot) TopologyDomains(k int32) []int32 { return s.topo.nodes[k] }

// TopologyValue returns the id of the node's value of key id k, -1 when the
// node has no such label.
func (ni *NodeInfo) TopologyValue(k int32) int32 {
	if k >= 0 && int(k) < len(ni.topo) {
		return ni.topo[k]
	}
	return -1
}

// Domain returns the node's domain of key id k; false when the node has no
// such label.
func (ni *NodeInfo) Domain(k int32) (DomainID, bool) {
	v := ni.TopologyValue(k)
	return DomainID{k, v}, v >= 0
}

// setTopology interns the labels of ni's node (nil: none) and counts them;
// the node's previous labels, if any, were uncounted by unsetTopology.
func (s *Snapshot) setTopology(ni *NodeInfo) {
	ni.topo = nil
	if ni.Node == nil {
		return
	}
	t := &s.topo
	for k, v := range ni.Node.Labels {
		kid, ok := t.keys[k]
		if !ok {
			kid = int32(len(t.values))
			t.keys[k] = kid
			t.values = append(t.values, map[string]int32{})
			t.nodes = append(t.nodes, nil)
		}
		vid, ok := t.values[kid][v]
		if !ok {
			vid = int32(len(t.nodes[kid]))
			t.values[kid][v] = vid
			t.nodes[kid] = append(t.nodes[kid], 0)
		} else if t.nodes[kid][vid] == 0 {
			t.dead--
		}
		t.nodes[kid][vid]++
		if int(kid) >= len(ni.topo) {
			ni.topo = append(ni.topo, make([]int32, int(kid)+1-len(ni.topo))...)
		}
		ni.topo[kid] = vid + 1 // shifted below, so that 0 means "absent"
	}
	for i := range ni.topo {
		ni.topo[i]--
	}
}

// unsetTopology uncounts ni's labels; it compacts the ids when dead ones
// outnumber the live ones (and a thousand).
func (s *Snapshot) unsetTopology(ni *NodeInfo) {
	t := &s.topo
	for k, v := range ni.topo {
		if v < 0 {
			continue
		}
		if t.nodes[k][v]--; t.nodes[k][v] == 0 {
			t.dead++
		}
	}
	ni.topo = nil
	live := 0
	for _, vals := range t.nodes {
		live += len(vals)
	}
	if live -= t.dead; t.dead > max(live, 1024) {
		s.compactTopology(ni)
	}
}

// compactTopology reassigns every id from the existing nodes' labels
// (except skip's, which is being changed).
func (s *Snapshot) compactTopology(skip *NodeInfo) {
	s.topo = newTopology()
	for _, ni := range s.Nodes {
		if ni != skip {
			s.setTopology(ni)
		}
	}
}

// topologyOf is the labels of a node as the snapshot interned them, for
// tests.
func (s *Snapshot) topologyOf(node *corev1.Node) map[string]string {
	ni := s.NodeInfo(node.Name)
	out := map[string]string{}
	for k, kid := range s.topo.keys {
		if v := ni.TopologyValue(kid); v >= 0 {
			for name, vid := range s.topo.values[kid] {
				if vid == v {
					out[k] = name
				}
			}
		}
	}
	return out
}
