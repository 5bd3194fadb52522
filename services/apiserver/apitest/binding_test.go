package apitest

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cairn-dev/cairn/schemas/fit"
	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
)

func podRequesting(name, cpu, mem string) *corev1.Pod {
	p := testPod(name)
	p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse(cpu),
		corev1.ResourceMemory: resource.MustParse(mem),
	}
	return p
}

func nodeWith(name, cpu, mem, pods string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	n.Status.Allocatable = corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse(cpu),
		corev1.ResourceMemory: resource.MustParse(mem),
		corev1.ResourcePods:   resource.MustParse(pods),
	}
	n.Status.Capacity = n.Status.Allocatable
	return n
}

// TestBindingOvercommit: a binding that would overcommit the node's
// allocatable resources is refused with 409, and nothing is written; the
// room of a deleted or finished pod is given back.
func TestBindingOvercommit(t *testing.T) {
	env := controlplanetest.Start(t)
	ctx := ctxFor(t, 60*time.Second)
	pods := env.Client.CoreV1().Pods("default")
	if _, err := env.Client.CoreV1().Nodes().Create(ctx, nodeWith("small", "1", "1Gi", "3"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	bind := func(pod string) error {
		return pods.Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: pod},
			Target: corev1.ObjectReference{Kind: "Node", Name: "small"}}, metav1.CreateOptions{})
	}
	for _, p := range []*corev1.Pod{
		podRequesting("a", "600m", "100Mi"), podRequesting("b", "600m", "100Mi"),
		podRequesting("c", "100m", "2Gi"), podRequesting("d", "100m", "100Mi"),
		podRequesting("e", "100m", "100Mi"), podRequesting("f", "100m", "100Mi"),
	} {
		if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := bind("a"); err != nil {
		t.Fatalf("bind a: %v", err)
	}
	before := settle(t, env)
	for _, tc := range []struct{ pod, want string }{
		{"b", "Insufficient cpu"},
		{"c", "Insufficient memory"},
	} {
		err := bind(tc.pod)
		if !apierrors.IsConflict(err) || !strings.Contains(err.Error(), "binding rejected: node small: "+tc.want) {
			t.Errorf("bind %s: got %v, want 409 %q", tc.pod, err, tc.want)
		}
		if !fit.IsOvercommitted(err) {
			t.Errorf("bind %s: got %v, want a %s cause", tc.pod, err, fit.CauseOvercommitted)
		}
	}
	requireNothingWritten(t, env, before)

	// Pods count: allocatable 3.
	for _, p := range []string{"d", "e"} {
		if err := bind(p); err != nil {
			t.Fatalf("bind %s: %v", p, err)
		}
	}
	if err := bind("f"); !apierrors.IsConflict(err) || !strings.Contains(err.Error(), "Too many pods") {
		t.Errorf("bind f: got %v, want 409 Too many pods", err)
	}

	// A deleted pod and a finished pod give their room back.
	if err := pods.Delete(ctx, "a", *metav1.NewDeleteOptions(0)); err != nil {
		t.Fatal(err)
	}
	if err := bind("b"); err != nil {
		t.Fatalf("bind b after deleting a: %v", err)
	}
	d, err := pods.Get(ctx, "d", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d.Status.Phase = corev1.PodSucceeded
	if _, err := pods.UpdateStatus(ctx, d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := bind("f"); err != nil {
		t.Fatalf("bind f after d finished: %v", err)
	}
}

// TestBindingNoPodsAllocatable: a node whose allocatable lists no pods
// takes none, as kube-scheduler counts it; the refusal carries the typed
// cause the scheduler acts on, and a conflict that is not a refusal (the
// pod is already bound) does not.
func TestBindingNoPodsAllocatable(t *testing.T) {
	env := controlplanetest.Start(t)
	ctx := ctxFor(t, 60*time.Second)
	pods := env.Client.CoreV1().Pods("default")
	nodes := env.Client.CoreV1().Nodes()
	bare := nodeWith("bare", "1", "1Gi", "1")
	delete(bare.Status.Allocatable, corev1.ResourcePods)
	for _, n := range []*corev1.Node{bare, nodeWith("roomy", "1", "1Gi", "10")} {
		if _, err := nodes.Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pods.Create(ctx, podRequesting("a", "100m", "10Mi"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	bind := func(node string) error {
		return pods.Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "a"},
			Target: corev1.ObjectReference{Kind: "Node", Name: node}}, metav1.CreateOptions{})
	}
	before := settle(t, env)
	err := bind("bare")
	const want = "binding rejected: node bare: Too many pods (requested 1, allocated 0 of 0)"
	if !apierrors.IsConflict(err) || !strings.Contains(err.Error(), want) || !fit.IsOvercommitted(err) {
		t.Fatalf("bind to bare: got %v, want 409 %q with a %s cause", err, want, fit.CauseOvercommitted)
	}
	var st apierrors.APIStatus
	if !errors.As(err, &st) || st.Status().Details == nil || len(st.Status().Details.Causes) != 1 ||
		st.Status().Details.Causes[0] != (metav1.StatusCause{Type: fit.CauseOvercommitted, Field: "target.name",
			Message: "Too many pods (requested 1, allocated 0 of 0)"}) {
		t.Errorf("bind to bare: causes %+v", st.Status().Details)
	}
	requireNothingWritten(t, env, before)
	if err := bind("roomy"); err != nil {
		t.Fatalf("bind to roomy: %v", err)
	}
	if err := bind("roomy"); !apierrors.IsConflict(err) || fit.IsOvercommitted(err) {
		t.Errorf("second binding: got %v, want 409 without a %s cause", err, fit.CauseOvercommitted)
	}
}

// TestBindingConcurrent: many bindings to one node race; exactly as many as
// fit commit, whatever the interleaving.
func TestBindingConcurrent(t *testing.T) {
	env := controlplanetest.Start(t)
	ctx := ctxFor(t, 60*time.Second)
	pods := env.Client.CoreV1().Pods("default")
	if _, err := env.Client.CoreV1().Nodes().Create(ctx, nodeWith("n", "1", "8Gi", "110"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const n = 30
	for i := range n {
		if _, err := pods.Create(ctx, podRequesting(fmt.Sprintf("p%d", i), "100m", "10Mi"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	bound, refused := raceBindings(t, n, func(i int) error {
		return pods.Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%d", i)},
			Target: corev1.ObjectReference{Kind: "Node", Name: "n"}}, metav1.CreateOptions{})
	})
	if bound != 10 || refused != n-10 {
		t.Errorf("bound %d, refused %d; want 10 and %d", bound, refused, n-10)
	}
	list, err := pods.List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=n"})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 10 {
		t.Errorf("%d pods on node n, want 10", len(list.Items))
	}
}

// raceBindings makes n bindings at once, bind(0) .. bind(n-1), and counts
// those made and those refused with 409 Conflict; any other error fails t.
func raceBindings(t *testing.T, n int, bind func(i int) error) (bound, refused int) {
	t.Helper()
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i := range n {
		wg.Go(func() {
			err := bind(i)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				bound++
			case apierrors.IsConflict(err):
				refused++
			default:
				t.Errorf("bind p%d: %v", i, err)
			}
		})
	}
	wg.Wait()
	return bound, refused
}
