package fit_test

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/cairn-dev/cairn/schemas/fit"
)

// A pod asking for 600m of a node with 1 cpu, 500m of it taken; the node's
// allocatable lists no pods, so it takes none.
func Example() {
	pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("600m")}}}}}}
	node := fit.Node{
		Allocatable: fit.NodeAllocatable(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}),
		Requested:   fit.Resources{MilliCPU: 500},
	}
	for _, lack := range fit.Fits(fit.PodRequests(pod, fit.Options{}), node) {
		fmt.Println(lack)
	}
	// Output:
	// Too many pods (requested 1, allocated 0 of 0)
	// Insufficient cpu (requested 600, allocated 500 of 1000)
}
