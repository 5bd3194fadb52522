package framework

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/cairn-dev/cairn/schemas/fit"
)

// Defaults the scoring plugins assume for a container that requests no
// cpu or memory (kube-scheduler's DefaultMilliCPURequest and
// DefaultMemoryRequest): 0.1 core and 200 MiB.
const (
	DefaultMilliCPURequest int64 = 100
	DefaultMemoryRequest   int64 = 200 * 1024 * 1024
)

// nonZero counts request-less containers with the scoring defaults.
var nonZero = fit.Options{NonMissing: fit.Resources{MilliCPU: DefaultMilliCPURequest, Memory: DefaultMemoryRequest}}

// PodRequests is what a pod requests, by the rule the apiserver's binding
// check also applies (fit.PodRequests). nonZero is the same with every
// container's missing cpu or memory request counted as
// DefaultMilliCPURequest / DefaultMemoryRequest, which the scoring plugins
// use so that request-less pods still spread.
func PodRequests(pod *corev1.Pod) (req, nonZeroReq fit.Resources) {
	return fit.PodRequests(pod, fit.Options{}), fit.PodRequests(pod, nonZero)
}
