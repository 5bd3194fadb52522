package framework

import (
	"context"
	"errors"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestNumFeasibleNodesToFind(t *testing.T) {
	tests := []struct {
		nodes int
		pct   int32
		want  int
	}{
		{10, 0, 10}, {99, 0, 99}, {100, 0, 50 * 100 / 100}, {1000, 0, 420}, {5000, 0, 500},
		{6000, 0, 6000 * 5 / 100 * 1}, {5000, 100, 5000}, {5000, 1, 100},
	}
	for _, tc := range tests {
		f := New(nil, nil, Options{PercentageOfNodesToScore: tc.pct})
		want := max(tc.want, min(tc.nodes, 100))
		if got := f.NumFeasibleNodesToFind(tc.nodes); got != want {
			t.Errorf("NumFeasibleNodesToFind(%d, pct %d) = %d, want %d", tc.nodes, tc.pct, got, want)
		}
	}
}

func TestFitErrorMessage(t *testing.T) {
	cpu := NewStatus(Unschedulable, "Insufficient cpu")
	taint := NewStatus(UnschedulableAndUnresolvable, "node(s) had untolerated taint {a: b}")
	tests := []struct {
		name string
		fe   FitError
		want string
	}{
		{"histogram", FitError{NumAllNodes: 5, Diagnosis: Diagnosis{NodeToStatus: map[string]*Status{
			"n1": cpu, "n2": cpu, "n3": cpu, "n4": taint, "n5": taint}}},
			"0/5 nodes are available: 2 node(s) had untolerated taint {a: b}, 3 Insufficient cpu."},
		{"prefilter", FitError{NumAllNodes: 2, Diagnosis: Diagnosis{PreFilterMsg: "parsing pod: x",
			NodeToStatus: map[string]*Status{"n1": cpu}}}, "0/2 nodes are available: parsing pod: x."},
		{"postfilter", FitError{NumAllNodes: 1, Diagnosis: Diagnosis{NodeToStatus: map[string]*Status{"n1": cpu},
			PostFilterMsg: "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."}},
			"0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."},
	}
	for _, tc := range tests {
		if got := tc.fe.Error(); got != tc.want {
			t.Errorf("%s:\n got %q\nwant %q", tc.name, got, tc.want)
		}
	}
}

// evenOnly admits nodes whose name ends in an even digit and counts calls.
type evenOnly struct{}

func (evenOnly) Name() string { return "EvenOnly" }
func (evenOnly) Filter(_ *CycleState, _ *PodInfo, ni *NodeInfo) *Status {
	if (ni.Name()[len(ni.Name())-1]-'0')%2 == 0 {
		return nil
	}
	return NewStatus(Unschedulable, "odd")
}

func TestSamplingRotatesAndStops(t *testing.T) {
	var nodes []*corev1.Node
	for i := range 1000 {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("n%04d", i)}}
		n.Status.Allocatable = corev1.ResourceList{corev1.ResourcePods: resource.MustParse("10")}
		nodes = append(nodes, n)
	}
	snap := NewSnapshot(nodes, nil)
	f := New([]Plugin{evenOnly{}}, nil, Options{Parallelism: 2, PercentageOfNodesToScore: 10, Seed: 1})
	pod := NewPodInfo(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "d"}}, 0)
	seen := map[string]bool{}
	for range 20 {
		res, err := f.Schedule(context.Background(), pod, snap)
		if err != nil {
			t.Fatal(err)
		}
		if res.Feasible != 100 || res.Evaluated < 198 || res.Evaluated > 210 {
			t.Fatalf("feasible %d evaluated %d, want 100 of ~200", res.Feasible, res.Evaluated)
		}
		seen[res.Node] = true
	}
	if len(seen) < 10 {
		t.Errorf("only %d distinct nodes chosen over 20 cycles: sampling does not rotate", len(seen))
	}
	_, err := New([]Plugin{evenOnly{}}, nil, Options{}).Schedule(context.Background(), pod, NewSnapshot(nodes[1:2], nil))
	var fe *FitError
	if !errors.As(err, &fe) || fe.Error() != "0/1 nodes are available: 1 odd." {
		t.Fatalf("err = %v", err)
	}
}

func TestPodRequests(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	c := func(cpu string) corev1.Container {
		return corev1.Container{Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}
	}
	sidecar := c("500m")
	sidecar.RestartPolicy = &always
	tests := []struct {
		name    string
		spec    corev1.PodSpec
		wantCPU int64
		wantMem int64 // non-zero memory
	}{
		{"containers sum", corev1.PodSpec{Containers: []corev1.Container{c("1"), c("2")}}, 3000, 2 * DefaultMemoryRequest},
		{"init max", corev1.PodSpec{Containers: []corev1.Container{c("1")}, InitContainers: []corev1.Container{c("4"), c("2")}}, 4000, DefaultMemoryRequest},
		{"sidecar adds", corev1.PodSpec{Containers: []corev1.Container{c("1")}, InitContainers: []corev1.Container{sidecar}}, 1500, 2 * DefaultMemoryRequest},
		{"overhead adds", corev1.PodSpec{Containers: []corev1.Container{c("1")}, Overhead: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")}}, 1250, DefaultMemoryRequest},
	}
	for _, tc := range tests {
		req, nz := PodRequests(&corev1.Pod{Spec: tc.spec})
		if req.MilliCPU != tc.wantCPU || nz.Memory != tc.wantMem || req.Memory != 0 {
			t.Errorf("%s: cpu %d (want %d), non-zero memory %d (want %d), memory %d", tc.name, req.MilliCPU, tc.wantCPU, nz.Memory, tc.wantMem, req.Memory)
		}
	}
}
