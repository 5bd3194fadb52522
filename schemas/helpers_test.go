package schemas

import (
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

var testNow = time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)

func testRegistry() *Registry {
	return NewRegistry(WithClock(func() time.Time { return testNow }))
}

func mustLookup(t testing.TB, r *Registry, group, plural string) *Resource {
	t.Helper()
	gv := map[string]string{"": "v1", "apps": "v1", "batch": "v1", "coordination.k8s.io": "v1", "policy": "v1", "scheduling.k8s.io": "v1", "discovery.k8s.io": "v1"}
	res, ok := r.Lookup(group, gv[group], plural)
	if !ok {
		t.Fatalf("no resource %s/%s", group, plural)
	}
	return res
}

// errKeys renders errors as "<type> <field>" for comparisons.
func errKeys(errs field.ErrorList) []string {
	out := make([]string, 0, len(errs))
	for _, e := range errs {
		out = append(out, string(e.Type)+" "+e.Field)
	}
	slices.Sort(out)
	return out
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

func newPod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "app", Image: "nginx:1.27"}},
		},
	}
}

func newDeployment(name string) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx"}}},
			},
		},
	}
}

func newPodDisruptionBudget(name string) *policyv1.PodDisruptionBudget {
	one := intstr.FromInt32(1)
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: &one,
			Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
		},
	}
}

func newReplicaSet(name string) *appsv1.ReplicaSet {
	d := newDeployment(name)
	return &appsv1.ReplicaSet{
		ObjectMeta: d.ObjectMeta,
		Spec:       appsv1.ReplicaSetSpec{Selector: d.Spec.Selector, Template: d.Spec.Template},
	}
}

// created runs the create pipeline (Default, PrepareForCreate) and gives
// the object a resourceVersion, as stored objects have.
func created[T Object](res *Resource, obj T) T {
	res.Default(obj)
	res.PrepareForCreate(obj)
	obj.SetResourceVersion("5")
	return obj
}

// wantCreateErrors runs mutate and the create pipeline (Default,
// PrepareForCreate) on obj and checks ValidateCreate against want with
// wantDetails.
func wantCreateErrors[T Object](t *testing.T, res *Resource, obj T, mutate func(T), want []string) {
	t.Helper()
	mutate(obj)
	res.Default(obj)
	res.PrepareForCreate(obj)
	wantDetails(t, res.ValidateCreate(obj), want)
}
