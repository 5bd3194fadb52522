package framework_test

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fw "github.com/cairn-dev/cairn/services/scheduler/framework"
	"github.com/cairn-dev/cairn/services/scheduler/plugins"
)

func node(name, cpu string, taints ...corev1.Taint) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{Taints: taints}}
	n.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu),
		corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("110")}
	return n
}

func pod(name, cpu string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "app", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}}}}
}

// Place a pod on a small cluster with kube-scheduler's default plugins, then
// explain why a bigger one fits nowhere.
func Example() {
	gpu := corev1.Taint{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}
	snap := fw.NewSnapshot([]*corev1.Node{node("n1", "2"), node("n2", "4"), node("n3", "16", gpu)}, nil)
	f := plugins.NewDefaultFramework(fw.Options{Seed: 1})

	res, err := f.Schedule(context.Background(), fw.NewPodInfo(pod("web", "3"), 0), snap)
	fmt.Println(res.Node, err)
	snap.AddPod(fw.NewPodInfo(pod("web", "3"), 0), res.Node) // assume it

	_, err = f.Schedule(context.Background(), fw.NewPodInfo(pod("batch", "3"), 0), snap)
	var fe *fw.FitError
	fmt.Println(errors.As(err, &fe), err)
	// Output:
	// n2 <nil>
	// true 0/3 nodes are available: 1 node(s) had untolerated taint {dedicated: gpu}, 2 Insufficient cpu.
}
