package fit

import (
	corev1 "k8s.io/api/core/v1"
)

// Resources is an amount of the resources cairn accounts: cpu in
// millicores, memory and ephemeral storage in bytes. The JSON names are
// those of the apiserver's binding ledgers, which store them.
type Resources struct {
	MilliCPU         int64 `json:"cpu,omitempty"`
	Memory           int64 `json:"memory,omitempty"`
	EphemeralStorage int64 `json:"ephemeralStorage,omitempty"`
}

// Add returns r + o.
func (r Resources) Add(o Resources) Resources {
	return Resources{r.MilliCPU + o.MilliCPU, r.Memory + o.Memory, r.EphemeralStorage + o.EphemeralStorage}
}

// Sub returns r - o.
func (r Resources) Sub(o Resources) Resources {
	return Resources{r.MilliCPU - o.MilliCPU, r.Memory - o.Memory, r.EphemeralStorage - o.EphemeralStorage}
}

// Max returns the per-resource maximum of r and o.
func (r Resources) Max(o Resources) Resources {
	return Resources{max(r.MilliCPU, o.MilliCPU), max(r.Memory, o.Memory), max(r.EphemeralStorage, o.EphemeralStorage)}
}

// FromList reads the accounted resources of a resource list; the others
// are ignored, and a missing one is 0.
func FromList(l corev1.ResourceList) Resources {
	var r Resources
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

// Options changes how PodRequests counts, as kube's PodResourcesOptions.
type Options struct {
	// NonMissing is what a container that requests no cpu (no memory)
	// counts as requesting, when it is not 0: kube's
	// NonMissingContainerRequests, which the scheduler's scoring sets to
	// 100m and 200Mi. Only cpu and memory are used.
	NonMissing Resources
}

// PodRequests is what pod requests of a node (see the package doc): app
// containers and sidecars summed, raised to the largest init container
// with the sidecars before it, pod-level cpu and memory requests in place
// of the containers' when set, plus the overhead.
func PodRequests(pod *corev1.Pod, opts Options) Resources {
	var sum Resources
	for i := range pod.Spec.Containers {
		sum = sum.Add(opts.container(pod.Spec.Containers[i].Resources.Requests))
	}
	var sidecars, init Resources
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		r := opts.container(c.Resources.Requests)
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			sum = sum.Add(r)
			sidecars = sidecars.Add(r)
			continue
		}
		init = init.Max(r.Add(sidecars))
	}
	sum = sum.Max(init)
	if pr := pod.Spec.Resources; pr != nil {
		if q, ok := pr.Requests[corev1.ResourceCPU]; ok {
			sum.MilliCPU = q.MilliValue()
		}
		if q, ok := pr.Requests[corev1.ResourceMemory]; ok {
			sum.Memory = q.Value()
		}
	}
	if pod.Spec.Overhead != nil {
		sum = sum.Add(FromList(pod.Spec.Overhead))
	}
	return sum
}

// container is the request of one container under opts.
func (opts Options) container(l corev1.ResourceList) Resources {
	r := FromList(l)
	if _, ok := l[corev1.ResourceCPU]; !ok && opts.NonMissing.MilliCPU != 0 {
		r.MilliCPU = opts.NonMissing.MilliCPU
	}
	if _, ok := l[corev1.ResourceMemory]; !ok && opts.NonMissing.Memory != 0 {
		r.Memory = opts.NonMissing.Memory
	}
	return r
}
