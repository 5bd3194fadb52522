package fit

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestNodeAllocatable(t *testing.T) {
	tests := []struct {
		name string
		l    corev1.ResourceList
		want Allocatable
	}{
		{"all", corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("1Gi"),
			corev1.ResourceEphemeralStorage: resource.MustParse("10Gi"), corev1.ResourcePods: resource.MustParse("110")},
			Allocatable{Resources{2000, 1 << 30, 10 << 30}, 110}},
		// kube's NodeInfo: AllowedPodNumber is 0 when allocatable has no pods.
		{"no pods", corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}, Allocatable{Resources{MilliCPU: 2000}, 0}},
		{"nothing", nil, Allocatable{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := NodeAllocatable(tt.l); got != tt.want {
				t.Errorf("NodeAllocatable = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestFits(t *testing.T) {
	node := Allocatable{Resources{MilliCPU: 1000, Memory: 1 << 30, EphemeralStorage: 10 << 30}, 3}
	tests := []struct {
		name string
		req  Resources
		node Node
		want []Insufficient
	}{
		{"empty node", Resources{MilliCPU: 1000, Memory: 1 << 30}, Node{Allocatable: node}, nil},
		{"exactly full fits", Resources{MilliCPU: 400}, Node{Allocatable: node, Requested: Resources{MilliCPU: 600}, Pods: 2}, nil},
		{"cpu", Resources{MilliCPU: 500}, Node{Allocatable: node, Requested: Resources{MilliCPU: 600}, Pods: 1},
			[]Insufficient{{corev1.ResourceCPU, "Insufficient cpu", 500, 600, 1000}}},
		{"memory", Resources{Memory: 2 << 30}, Node{Allocatable: node},
			[]Insufficient{{corev1.ResourceMemory, "Insufficient memory", 2 << 30, 0, 1 << 30}}},
		{"ephemeral storage", Resources{EphemeralStorage: 11 << 30}, Node{Allocatable: node},
			[]Insufficient{{corev1.ResourceEphemeralStorage, "Insufficient ephemeral-storage", 11 << 30, 0, 10 << 30}}},
		{"pods", Resources{}, Node{Allocatable: node, Pods: 3},
			[]Insufficient{{corev1.ResourcePods, "Too many pods", 1, 3, 3}}},
		{"every reason, in kube's order", Resources{MilliCPU: 1, Memory: 1, EphemeralStorage: 1},
			Node{Allocatable: node, Requested: node.Resources, Pods: 3},
			[]Insufficient{{corev1.ResourcePods, "Too many pods", 1, 3, 3}, {corev1.ResourceCPU, "Insufficient cpu", 1, 1000, 1000},
				{corev1.ResourceMemory, "Insufficient memory", 1, 1 << 30, 1 << 30},
				{corev1.ResourceEphemeralStorage, "Insufficient ephemeral-storage", 1, 10 << 30, 10 << 30}}},
		{"what the pod does not request is never insufficient", Resources{MilliCPU: 100},
			Node{Allocatable: node, Requested: Resources{Memory: 2 << 30}}, nil},
		{"a request-less pod fits an overcommitted node", Resources{},
			Node{Allocatable: node, Requested: Resources{MilliCPU: 5000}, Pods: 1}, nil},
		// kube-scheduler: a node whose allocatable has no pods takes none.
		{"no pods allocatable", Resources{}, Node{Allocatable: Allocatable{Resources: node.Resources}},
			[]Insufficient{{corev1.ResourcePods, "Too many pods", 1, 0, 0}}},
		{"no cpu allocatable", Resources{MilliCPU: 1}, Node{Allocatable: Allocatable{Pods: 110}},
			[]Insufficient{{corev1.ResourceCPU, "Insufficient cpu", 1, 0, 0}}},
		{"nothing allocatable, nothing requested", Resources{}, Node{Allocatable: Allocatable{Pods: 110}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Fits(tt.req, tt.node)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Fits = %+v, want %+v", got, tt.want)
			}
			var reasons []string
			for _, i := range tt.want {
				reasons = append(reasons, i.Reason)
			}
			if got := Check(tt.req, tt.node).Reasons(); !reflect.DeepEqual(got, reasons) {
				t.Errorf("Check().Reasons() = %q, want %q", got, reasons)
			}
		})
	}
}

func TestInsufficientString(t *testing.T) {
	i := Insufficient{corev1.ResourceCPU, "Insufficient cpu", 200, 600, 700}
	if got, want := i.String(), "Insufficient cpu (requested 200, allocated 600 of 700)"; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
}

func TestMisfitReasons(t *testing.T) {
	tests := []struct {
		m    Misfit
		want []string
	}{
		{0, nil},
		{TooManyPods, []string{"Too many pods"}},
		{InsufficientMemory | InsufficientCPU, []string{"Insufficient cpu", "Insufficient memory"}},
		{Misfits - 1, []string{"Too many pods", "Insufficient cpu", "Insufficient memory", "Insufficient ephemeral-storage"}},
	}
	for _, tt := range tests {
		if got := tt.m.Reasons(); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Misfit(%d).Reasons() = %q, want %q", tt.m, got, tt.want)
		}
	}
}

func BenchmarkCheck(b *testing.B) {
	n := Node{Allocatable: Allocatable{Resources{MilliCPU: 64000, Memory: 512 << 30}, 110}, Requested: Resources{MilliCPU: 63950}, Pods: 50}
	req := Resources{MilliCPU: 100, Memory: 100 << 20}
	for b.Loop() {
		if Check(req, n) != InsufficientCPU {
			b.Fatal("fits")
		}
	}
}
