package disruption_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.uber.org/goleak"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"

	"github.com/cairn-dev/cairn/events/consumer/consumertest"
	"github.com/cairn-dev/cairn/services/controllers/disruption"
	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const wait = 30 * time.Second

type rig struct {
	t   *testing.T
	env *controlplanetest.Env
	ns  string
}

// start runs a control plane and the controller (alone: no ReplicaSet
// controller, no kubelet; the test plays their parts), and creates ns.
func start(t *testing.T, ns string) *rig {
	t.Helper()
	env := controlplanetest.Start(t)
	m := consumertest.Manager(t, env, controlplanetest.ControllerToken, controlplanetest.Logger("DISRUPTION_TEST_LOG"), nil)
	if _, err := disruption.New(m, disruption.Options{}); err != nil {
		t.Fatal(err)
	}
	controlplanetest.RunSynced(t, m)
	if _, err := env.Client.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return &rig{t: t, env: env, ns: ns}
}

// pod creates a pod labelled app=name's prefix, owned by owner if given,
// and makes it Running and Ready (or not).
func (r *rig) pod(name string, app string, ready bool, owner *metav1.OwnerReference) *corev1.Pod {
	r.t.Helper()
	ctx := context.Background()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: r.ns, Labels: map[string]string{"app": app}},
		Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	if owner != nil {
		p.OwnerReferences = []metav1.OwnerReference{*owner}
	}
	p, err := r.env.Client.CoreV1().Pods(r.ns).Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		r.t.Fatal(err)
	}
	return r.setReady(p, ready)
}

func (r *rig) setReady(p *corev1.Pod, ready bool) *corev1.Pod {
	r.t.Helper()
	var out *corev1.Pod
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		cur, err := r.env.Client.CoreV1().Pods(r.ns).Get(context.Background(), p.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		st := corev1.ConditionFalse
		if ready {
			st = corev1.ConditionTrue
		}
		cur.Status.Phase = corev1.PodRunning
		cur.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}
		out, err = r.env.Client.CoreV1().Pods(r.ns).UpdateStatus(context.Background(), cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		r.t.Fatal(err)
	}
	return out
}

func (r *rig) pdb(name, app string, minAvailable, maxUnavailable *intstr.IntOrString) *policyv1.PodDisruptionBudget {
	r.t.Helper()
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: r.ns},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: minAvailable, MaxUnavailable: maxUnavailable,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}}}
	out, err := r.env.Client.PolicyV1().PodDisruptionBudgets(r.ns).Create(context.Background(), pdb, metav1.CreateOptions{})
	if err != nil {
		r.t.Fatal(err)
	}
	return out
}

// want waits until the budget's status has these counts and its
// DisruptionAllowed condition this reason, and returns it.
func (r *rig) want(name string, expected, desired, healthy, allowed int32, reason string) *policyv1.PodDisruptionBudget {
	r.t.Helper()
	var got *policyv1.PodDisruptionBudget
	var last string
	deadline := time.Now().Add(wait)
	for {
		var err error
		got, err = r.env.Client.PolicyV1().PodDisruptionBudgets(r.ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			r.t.Fatal(err)
		}
		st := got.Status
		cond := apimeta.FindStatusCondition(st.Conditions, policyv1.DisruptionAllowedCondition)
		last = fmt.Sprintf("expected %d desired %d healthy %d allowed %d observed %d/%d condition %+v",
			st.ExpectedPods, st.DesiredHealthy, st.CurrentHealthy, st.DisruptionsAllowed, st.ObservedGeneration, got.Generation, cond)
		if st.ExpectedPods == expected && st.DesiredHealthy == desired && st.CurrentHealthy == healthy && st.DisruptionsAllowed == allowed &&
			st.ObservedGeneration == got.Generation && cond != nil && cond.Reason == reason {
			return got
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("budget %s: %s; want expected %d desired %d healthy %d allowed %d reason %s", name, last, expected, desired, healthy, allowed, reason)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func ptr[T any](v T) *T { return &v }

// TestMinAvailable: a number counts the selected pods; readiness changes
// and deletions move the budget.
func TestMinAvailable(t *testing.T) {
	r := start(t, "min")
	var pods []*corev1.Pod
	for i := range 3 {
		pods = append(pods, r.pod(fmt.Sprintf("web-%d", i), "web", true, nil))
	}
	r.pod("other", "other", true, nil)
	r.pdb("web", "web", ptr(intstr.FromInt32(2)), nil)
	r.want("web", 3, 2, 3, 1, policyv1.SufficientPodsReason)

	r.setReady(pods[0], false)
	r.want("web", 3, 2, 2, 0, policyv1.InsufficientPodsReason)
	r.setReady(pods[0], true)
	r.want("web", 3, 2, 3, 1, policyv1.SufficientPodsReason)
	if err := r.env.Client.CoreV1().Pods(r.ns).Delete(context.Background(), pods[1].Name, metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))}); err != nil {
		t.Fatal(err)
	}
	r.want("web", 2, 2, 2, 0, policyv1.InsufficientPodsReason)

	// A change of the budget's spec is observed at its new generation.
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		cur, err := r.env.Client.PolicyV1().PodDisruptionBudgets(r.ns).Get(context.Background(), "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Spec.MinAvailable = ptr(intstr.FromInt32(1))
		_, err = r.env.Client.PolicyV1().PodDisruptionBudgets(r.ns).Update(context.Background(), cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := r.want("web", 2, 1, 2, 1, policyv1.SufficientPodsReason); got.Generation != 2 {
		t.Errorf("generation %d after a spec change, want 2", got.Generation)
	}

	r.pdb("empty", "nothing", ptr(intstr.FromInt32(1)), nil)
	r.want("empty", 0, 1, 0, 0, policyv1.InsufficientPodsReason)
	controlplanetest.WaitForEvent(t, r.env, r.ns, "empty", "NoPods")
}

// TestControllerScale: with maxUnavailable or a percentage, the expected
// pods are the replicas of the pods' controllers (a Deployment over its
// ReplicaSet, or a bare ReplicaSet), not the pods that exist; a pod
// without a controller makes the budget fail safe.
func TestControllerScale(t *testing.T) {
	r := start(t, "scale")
	ctx := context.Background()
	apps := r.env.Client.AppsV1()
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	tmpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	dep, err := apps.Deployments(r.ns).Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr(int32(4)), Selector: sel, Template: tmpl}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	yes := true
	rs, err := apps.ReplicaSets(r.ns).Create(ctx, &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web-1",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: dep.Name, UID: dep.UID, Controller: &yes}}},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr(int32(3)), Selector: sel, Template: tmpl}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	owner := &metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID, Controller: &yes}
	for i := range 3 {
		r.pod(fmt.Sprintf("web-1-%d", i), "web", true, owner)
	}
	// The Deployment's 4, not the ReplicaSet's 3 nor the 3 pods.
	r.pdb("max", "web", nil, ptr(intstr.FromInt32(1)))
	r.want("max", 4, 3, 3, 0, policyv1.InsufficientPodsReason)
	r.pdb("pct", "web", ptr(intstr.FromString("50%")), nil)
	r.want("pct", 4, 2, 3, 1, policyv1.SufficientPodsReason)

	// A pod without a controller: no disruption, SyncFailed, and an Event.
	r.pod("bare", "web", true, nil)
	got := r.want("max", 4, 3, 3, 0, policyv1.SyncFailedReason)
	if c := apimeta.FindStatusCondition(got.Status.Conditions, policyv1.DisruptionAllowedCondition); c.Message != `found no controller ref for pod "bare"` {
		t.Errorf("condition message %q", c.Message)
	}
	controlplanetest.WaitForEvent(t, r.env, r.ns, "max", "NoControllerRef")
}

// TestDisruptedPods: a pod the apiserver let an eviction through for is not
// counted healthy until it is deleted or two minutes have passed; then it
// leaves disruptedPods (with a NotDeleted Event when it was not deleted).
func TestDisruptedPods(t *testing.T) {
	r := start(t, "disrupted")
	for i := range 3 {
		r.pod(fmt.Sprintf("web-%d", i), "web", true, nil)
	}
	r.pdb("web", "web", ptr(intstr.FromInt32(1)), nil)
	r.want("web", 3, 1, 3, 2, policyv1.SufficientPodsReason)
	now := time.Now()
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		cur, err := r.env.Client.PolicyV1().PodDisruptionBudgets(r.ns).Get(context.Background(), "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Status.DisruptedPods = map[string]metav1.Time{
			"web-0": metav1.NewTime(now),                                                // just evicted
			"web-1": metav1.NewTime(now.Add(-disruption.DeletionTimeout - time.Minute)), // never deleted
			"gone":  metav1.NewTime(now),                                                // no such pod
		}
		_, err = r.env.Client.PolicyV1().PodDisruptionBudgets(r.ns).UpdateStatus(context.Background(), cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	got := r.want("web", 3, 1, 2, 1, policyv1.SufficientPodsReason)
	if _, ok := got.Status.DisruptedPods["web-0"]; !ok || len(got.Status.DisruptedPods) != 1 {
		t.Errorf("disruptedPods %v, want only web-0", got.Status.DisruptedPods)
	}
	controlplanetest.WaitForEvent(t, r.env, r.ns, "web-1", "NotDeleted")

	// Once the evicted pod is being deleted (its grace period running), it
	// leaves the map; it is still selected, not healthy.
	if err := r.env.Client.CoreV1().Pods(r.ns).Delete(context.Background(), "web-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	controlplanetest.Eventually(t, wait, "web-0 to leave disruptedPods", func() bool {
		got = r.want("web", 3, 1, 2, 1, policyv1.SufficientPodsReason)
		return len(got.Status.DisruptedPods) == 0
	})
}
