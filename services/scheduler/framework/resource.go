package framework

import (
	corev1 "k8s.io/api/core/v1"
)

// Defaults the scoring plugins assume for a container that requests no
// cpu or memory (kube-scheduler's DefaultMilliCPURequest and
// DefaultMemoryRequest): 0.1 core and 200 MiB.
const (
	DefaultMilliCPURequest int64 = 100
	DefaultMemoryRequest   int64 = 200 * 1024 * 1024
)

// Resource is an amount of the resources the scheduler accounts: cpu in
// millicores, memory and ephemeral storage in bytes, and a pod count (the
// node's allocatable "pods" for a node, unused for a pod).
type Resource struct {
	MilliCPU         int64
	Memory           int64
	EphemeralStorage int64
	AllowedPodNumber int
}

// NewResource sums a ResourceList.
func NewResource(rl corev1.ResourceList) Resource {
	var r Resource
	r.Add(rl)
	return r
}

// Add adds a ResourceList.
func (r *Resource) Add(rl corev1.ResourceList) {
	for name, q := range rl {
		switch name {
		case corev1.ResourceCPU:
			r.MilliCPU += q.MilliValue()
		case corev1.ResourceMemory:
			r.Memory += q.Value()
		case corev1.ResourceEphemeralStorage:
			r.EphemeralStorage += q.Value()
		case corev1.ResourcePods:
			r.AllowedPodNumber += int(q.Value())
		}
	}
}

// Plus adds o to r.
func (r *Resource) Plus(o Resource) {
	r.MilliCPU += o.MilliCPU
	r.Memory += o.Memory
	r.EphemeralStorage += o.EphemeralStorage
	r.AllowedPodNumber += o.AllowedPodNumber
}

// Minus subtracts o from r.
func (r *Resource) Minus(o Resource) {
	r.MilliCPU -= o.MilliCPU
	r.Memory -= o.Memory
	r.EphemeralStorage -= o.EphemeralStorage
	r.AllowedPodNumber -= o.AllowedPodNumber
}

// SetMax raises every field of r to at least o's.
func (r *Resource) SetMax(o Resource) {
	r.MilliCPU = max(r.MilliCPU, o.MilliCPU)
	r.Memory = max(r.Memory, o.Memory)
	r.EphemeralStorage = max(r.EphemeralStorage, o.EphemeralStorage)
}

// PodRequests computes what a pod requests, as Kubernetes does
// (component-helpers' PodRequests): the sum over its containers, plus its
// sidecars (init containers with restartPolicy Always), raised to the
// largest init container (each plus the sidecars started before it), plus
// spec.overhead. nonZero is the same with every container's missing cpu or
// memory request counted as DefaultMilliCPURequest / DefaultMemoryRequest,
// which the scoring plugins use so that request-less pods still spread.
func PodRequests(pod *corev1.Pod) (req, nonZero Resource) {
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		cr := NewResource(c.Resources.Requests)
		req.Plus(cr)
		nonZero.Plus(withDefaults(cr, c.Resources.Requests))
	}
	var sidecars, sidecarsNZ, initMax, initMaxNZ Resource
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		cr := NewResource(c.Resources.Requests)
		nz := withDefaults(cr, c.Resources.Requests)
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			sidecars.Plus(cr)
			sidecarsNZ.Plus(nz)
			initMax.SetMax(sidecars)
			initMaxNZ.SetMax(sidecarsNZ)
			continue
		}
		cr.Plus(sidecars)
		nz.Plus(sidecarsNZ)
		initMax.SetMax(cr)
		initMaxNZ.SetMax(nz)
	}
	req.Plus(sidecars)
	nonZero.Plus(sidecarsNZ)
	req.SetMax(initMax)
	nonZero.SetMax(initMaxNZ)
	if pod.Spec.Overhead != nil {
		o := NewResource(pod.Spec.Overhead)
		req.Plus(o)
		nonZero.Plus(o)
	}
	return req, nonZero
}

func withDefaults(r Resource, rl corev1.ResourceList) Resource {
	if _, ok := rl[corev1.ResourceCPU]; !ok {
		r.MilliCPU = DefaultMilliCPURequest
	}
	if _, ok := rl[corev1.ResourceMemory]; !ok {
		r.Memory = DefaultMemoryRequest
	}
	return r
}
