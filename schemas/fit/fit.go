package fit

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// Allocatable is what a node offers pods: its status.allocatable, read by
// NodeAllocatable.
type Allocatable struct {
	Resources
	// Pods is the number of pods the node takes: allocatable "pods", 0 when
	// the node does not list it (kube's AllowedPodNumber).
	Pods int64
}

// NodeAllocatable reads a node's status.allocatable. A resource it does
// not list is 0: the node has none of it.
func NodeAllocatable(l corev1.ResourceList) Allocatable {
	a := Allocatable{Resources: FromList(l)}
	if q, ok := l[corev1.ResourcePods]; ok {
		a.Pods = q.Value()
	}
	return a
}

// Node is a node as a fit is checked against it: what it offers, and the
// pods already counted on it with the sum of their requests.
type Node struct {
	Allocatable Allocatable
	Requested   Resources
	Pods        int
}

// Misfit is the set of resources a node lacks for a pod; 0: the pod fits.
// Its bits are in kube's order of reasons.
type Misfit uint8

// The resources of a Misfit.
const (
	TooManyPods Misfit = 1 << iota
	InsufficientCPU
	InsufficientMemory
	InsufficientEphemeralStorage

	// Misfits is the number of distinct Misfit values, 0 included.
	Misfits = 1 << iota
)

// The reasons, in kube-scheduler's words (noderesources.fitsRequest).
const (
	ReasonTooManyPods                  = "Too many pods"
	ReasonInsufficientCPU              = "Insufficient cpu"
	ReasonInsufficientMemory           = "Insufficient memory"
	ReasonInsufficientEphemeralStorage = "Insufficient ephemeral-storage"
)

var (
	misfitResources = [...]corev1.ResourceName{corev1.ResourcePods, corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage}
	misfitReasons   = [...]string{ReasonTooManyPods, ReasonInsufficientCPU, ReasonInsufficientMemory, ReasonInsufficientEphemeralStorage}
)

// Check says what n lacks for a pod requesting req, without allocating:
// room for one more pod, and every resource req asks for (> 0) that is
// more than the node has left. The scheduler's filter runs it for every
// node of every cycle.
func Check(req Resources, n Node) Misfit {
	var m Misfit
	if int64(n.Pods)+1 > n.Allocatable.Pods {
		m |= TooManyPods
	}
	have, used := n.Allocatable.Resources, n.Requested
	if req.MilliCPU > 0 && req.MilliCPU > have.MilliCPU-used.MilliCPU {
		m |= InsufficientCPU
	}
	if req.Memory > 0 && req.Memory > have.Memory-used.Memory {
		m |= InsufficientMemory
	}
	if req.EphemeralStorage > 0 && req.EphemeralStorage > have.EphemeralStorage-used.EphemeralStorage {
		m |= InsufficientEphemeralStorage
	}
	return m
}

// Reasons are the reasons of m in kube's words and order, e.g.
// ["Too many pods", "Insufficient cpu"]; nil if m is 0.
func (m Misfit) Reasons() []string {
	var out []string
	for i, r := range misfitReasons {
		if m&(1<<i) != 0 {
			out = append(out, r)
		}
	}
	return out
}

// Insufficient is one resource a node lacks for a pod (kube's
// InsufficientResource): the pod's request of it, what the pods counted
// on the node use and what the node has (for pods: 1, the pods counted,
// allocatable pods).
type Insufficient struct {
	Resource  corev1.ResourceName
	Reason    string
	Requested int64
	Used      int64
	Capacity  int64
}

// String is the reason with the amounts, e.g. "Insufficient cpu
// (requested 200, allocated 600 of 700)".
func (i Insufficient) String() string {
	return fmt.Sprintf("%s (requested %d, allocated %d of %d)", i.Reason, i.Requested, i.Used, i.Capacity)
}

// Fits returns what n lacks for a pod requesting req, one Insufficient per
// resource in kube's order (kube-scheduler's noderesources.Fits); nil if
// the pod fits.
func Fits(req Resources, n Node) []Insufficient {
	m := Check(req, n)
	if m == 0 {
		return nil
	}
	reqs := [...]int64{1, req.MilliCPU, req.Memory, req.EphemeralStorage}
	used := [...]int64{int64(n.Pods), n.Requested.MilliCPU, n.Requested.Memory, n.Requested.EphemeralStorage}
	have := n.Allocatable
	capacity := [...]int64{have.Pods, have.MilliCPU, have.Memory, have.EphemeralStorage}
	out := make([]Insufficient, 0, 4)
	for i := range misfitReasons {
		if m&(1<<i) != 0 {
			out = append(out, Insufficient{Resource: misfitResources[i], Reason: misfitReasons[i],
				Requested: reqs[i], Used: used[i], Capacity: capacity[i]})
		}
	}
	return out
}
