// Package nodeipam gives every Node a pod CIDR (spec.podCIDR and
// spec.podCIDRs), as kube-controller-manager's node IPAM controller does with
// --allocate-node-cidrs: consecutive subnets of one size carved out of the
// cluster CIDR, each given to one node and taken back when the node goes.
// The kubelet hands the pod CIDR to CNI's host-local IPAM.
//
// # One allocator at a time
//
// Choosing a free subnet needs the whole picture, so all nodes map to the
// single work key "cluster": with several controller-manager replicas, the
// replica that owns that key allocates for every node, and no two replicas
// ever hand out subnets at once. Before it chooses, it waits until its node
// cache has applied everything on the log (a takeover sees the previous
// owner's allocations), remembers the subnets it gave out itself until the
// cache shows them, and writes each node with an update conditioned on the
// node's resourceVersion, so a podCIDR is never overwritten.
package nodeipam
