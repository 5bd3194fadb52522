package schemas

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestPodRequests(t *testing.T) {
	c := func(cpu, mem string) corev1.Container {
		return corev1.Container{Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}}}
	}
	sidecar := func(cpu, mem string) corev1.Container {
		s := c(cpu, mem)
		always := corev1.ContainerRestartPolicyAlways
		s.RestartPolicy = &always
		return s
	}
	tests := []struct {
		name string
		spec corev1.PodSpec
		want Requests
	}{
		{"none", corev1.PodSpec{Containers: []corev1.Container{{}}}, Requests{}},
		{"sum of containers", corev1.PodSpec{Containers: []corev1.Container{c("100m", "1Mi"), c("250m", "2Mi")}},
			Requests{MilliCPU: 350, Memory: 3 << 20}},
		{"init container larger", corev1.PodSpec{InitContainers: []corev1.Container{c("1", "1Mi")},
			Containers: []corev1.Container{c("100m", "4Mi")}}, Requests{MilliCPU: 1000, Memory: 4 << 20}},
		{"sidecar adds and counts under later inits", corev1.PodSpec{
			InitContainers: []corev1.Container{sidecar("200m", "1Mi"), c("500m", "1Mi")},
			Containers:     []corev1.Container{c("100m", "1Mi")}}, Requests{MilliCPU: 700, Memory: 2 << 20}},
		{"overhead", corev1.PodSpec{Containers: []corev1.Container{c("100m", "1Mi")},
			Overhead: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m")}}, Requests{MilliCPU: 150, Memory: 1 << 20}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := PodRequests(&corev1.Pod{Spec: tt.spec}); got != tt.want {
				t.Errorf("PodRequests = %+v, want %+v", got, tt.want)
			}
		})
	}
}
