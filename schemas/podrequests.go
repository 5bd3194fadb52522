package schemas

import (
	corev1 "k8s.io/api/core/v1"
)

// Requests is what a pod asks of a node: the sums the scheduler and the
// binding check compare with Node.status.allocatable.
type Requests struct {
	MilliCPU         int64 `json:"cpu,omitempty"`
	Memory           int64 `json:"memory,omitempty"`
	EphemeralStorage int64 `json:"ephemeralStorage,omitempty"`
}

// Add returns r + o.
func (r Requests) Add(o Requests) Requests {
	return Requests{r.MilliCPU + o.MilliCPU, r.Memory + o.Memory, r.EphemeralStorage + o.EphemeralStorage}
}

// Max returns the per-resource maximum of r and o.
func (r Requests) Max(o Requests) Requests {
	return Requests{max(r.MilliCPU, o.MilliCPU), max(r.Memory, o.Memory), max(r.EphemeralStorage, o.EphemeralStorage)}
}

// ResourceRequests reads the requests of one resource list.
func ResourceRequests(l corev1.ResourceList) Requests {
	var r Requests
	if q, ok := l[corev1.ResourceCPU]; ok {
		r.MilliCPU = q.MilliValue()
	}
	if q, ok := l[corev1.ResourceMemory]; ok {
		r.Memory = q.Value()
	}
	if q, ok := l[corev1.ResourceEphemeralStorage]; ok {
		r.EphemeralStorage = q.Value()
	}
	return r
}

// PodRequests is the effective request of a pod, by Kubernetes' rule
// (k8s.io/component-helpers/resource.PodRequests): the sum of the app
// containers and of the restartable (sidecar) init containers, or the
// largest one-off init container plus the sidecars started before it if
// that is more, plus the pod overhead.
func PodRequests(pod *corev1.Pod) Requests {
	var sum Requests
	for i := range pod.Spec.Containers {
		sum = sum.Add(ResourceRequests(pod.Spec.Containers[i].Resources.Requests))
	}
	var sidecars, init Requests
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		r := ResourceRequests(c.Resources.Requests)
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			sum = sum.Add(r)
			sidecars = sidecars.Add(r)
			continue
		}
		init = init.Max(r.Add(sidecars))
	}
	sum = sum.Max(init)
	if pod.Spec.Overhead != nil {
		sum = sum.Add(ResourceRequests(pod.Spec.Overhead))
	}
	return sum
}
