package apitest

import (
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
)

// TestEvictionBudget: pods/eviction honours PodDisruptionBudgets as kube's
// does. No disruption controller runs here: the test writes the budgets'
// status itself, as the controller would.
func TestEvictionBudget(t *testing.T) {
	env := controlplanetest.Start(t)
	ctx := ctxFor(t, 60*time.Second)
	pods := env.Client.CoreV1().Pods("default")
	budgets := env.Client.PolicyV1().PodDisruptionBudgets("default")
	evict := func(name string, opts *metav1.DeleteOptions) error {
		return env.Client.PolicyV1().Evictions("default").Evict(ctx, &policyv1.Eviction{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, DeleteOptions: opts})
	}
	// pod creates a pod bound to n1 labelled app, Running, Ready or not
	// (phase Pending leaves it as created).
	pod := func(name, app string, phase corev1.PodPhase, ready bool) {
		t.Helper()
		p := testPod(name)
		p.Labels = map[string]string{"app": app}
		p.Spec.NodeName = "n1"
		created, err := pods.Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if phase == corev1.PodPending {
			return
		}
		st := corev1.ConditionFalse
		if ready {
			st = corev1.ConditionTrue
		}
		created.Status.Phase = phase
		created.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}
		if _, err := pods.UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// budget creates a budget over app and writes the status the disruption
	// controller would: observed, healthy and desired as given.
	budget := func(name, app string, healthy, desired int32, policy *policyv1.UnhealthyPodEvictionPolicyType) *policyv1.PodDisruptionBudget {
		t.Helper()
		min := intstr.FromInt32(desired)
		b, err := budgets.Create(ctx, &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: &min, UnhealthyPodEvictionPolicy: policy,
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		b.Status = policyv1.PodDisruptionBudgetStatus{ObservedGeneration: b.Generation, CurrentHealthy: healthy, DesiredHealthy: desired,
			ExpectedPods: healthy, DisruptionsAllowed: max(healthy-desired, 0)}
		if b, err = budgets.UpdateStatus(ctx, b, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		return b
	}
	refused := func(t *testing.T, err error, cause string) {
		t.Helper()
		var se apierrors.APIStatus
		if !apierrors.IsTooManyRequests(err) || !errors.As(err, &se) {
			t.Fatalf("eviction: %v, want 429 TooManyRequests", err)
		}
		st := se.Status()
		if st.Message != "Cannot evict pod as it would violate the pod's disruption budget." || st.Details == nil || len(st.Details.Causes) != 1 ||
			st.Details.Causes[0].Type != policyv1.DisruptionBudgetCause || st.Details.Causes[0].Message != cause {
			t.Errorf("refusal %q %+v, want the cause %q", st.Message, st.Details, cause)
		}
	}
	deleting := func(t *testing.T, name string) bool {
		t.Helper()
		p, err := pods.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return p.DeletionTimestamp != nil
	}

	t.Run("the budget's one disruption is taken, then none is left", func(t *testing.T) {
		pod("web-a", "web", corev1.PodRunning, true)
		pod("web-b", "web", corev1.PodRunning, true)
		before := budget("web", "web", 2, 1, nil)
		if err := evict("web-a", nil); err != nil {
			t.Fatal(err)
		}
		if !deleting(t, "web-a") {
			t.Error("web-a is not being deleted after its eviction")
		}
		got, err := budgets.Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cond := apimeta.FindStatusCondition(got.Status.Conditions, policyv1.DisruptionAllowedCondition)
		if _, ok := got.Status.DisruptedPods["web-a"]; !ok || got.Status.DisruptionsAllowed != 0 || cond == nil || cond.Reason != policyv1.InsufficientPodsReason {
			t.Errorf("budget after the eviction: %+v, want web-a disrupted, none allowed, InsufficientPods", got.Status)
		}
		if got.Generation != before.Generation {
			t.Errorf("generation %d -> %d: a status write must not bump it", before.Generation, got.Generation)
		}
		refused(t, evict("web-b", nil), "The disruption budget web needs 1 healthy pods and has 2 currently")
		if deleting(t, "web-b") {
			t.Error("web-b is being deleted after a refused eviction")
		}
	})

	t.Run("a budget not yet observed at its generation refuses", func(t *testing.T) {
		pod("gen-a", "gen", corev1.PodRunning, true)
		b := budget("gen", "gen", 1, 0, nil)
		b.Spec.MinAvailable = &intstr.IntOrString{Type: intstr.String, StrVal: "10%"}
		if _, err := budgets.Update(ctx, b, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		refused(t, evict("gen-a", nil), "The disruption budget gen is still being processed by the server.")
	})

	t.Run("an unready pod goes when its budget is met, or with AlwaysAllow", func(t *testing.T) {
		pod("met-a", "met", corev1.PodRunning, false)
		budget("met", "met", 2, 2, nil)
		if err := evict("met-a", nil); err != nil {
			t.Fatalf("unready pod of a met budget: %v", err)
		}
		pod("unmet-a", "unmet", corev1.PodRunning, false)
		budget("unmet", "unmet", 1, 2, nil)
		refused(t, evict("unmet-a", nil), "The disruption budget unmet needs 2 healthy pods and has 1 currently")
		pod("always-a", "always", corev1.PodRunning, false)
		budget("always", "always", 1, 2, ptr(policyv1.AlwaysAllow))
		if err := evict("always-a", nil); err != nil {
			t.Fatalf("unready pod with AlwaysAllow: %v", err)
		}
	})

	t.Run("pending and finished pods ignore budgets", func(t *testing.T) {
		pod("idle-a", "idle", corev1.PodPending, false)
		pod("idle-b", "idle", corev1.PodSucceeded, false)
		budget("idle", "idle", 0, 5, nil)
		for _, name := range []string{"idle-a", "idle-b"} {
			if err := evict(name, nil); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		}
	})

	t.Run("two budgets", func(t *testing.T) {
		pod("two-a", "two", corev1.PodRunning, true)
		budget("two-1", "two", 1, 0, nil)
		budget("two-2", "two", 1, 0, nil)
		err := evict("two-a", nil)
		if !apierrors.IsInternalError(err) || !strings.Contains(err.Error(), "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.") {
			t.Errorf("eviction under two budgets: %v, want 500", err)
		}
	})

	t.Run("a dry run takes nothing", func(t *testing.T) {
		pod("dry-a", "dry", corev1.PodRunning, true)
		before := budget("dry", "dry", 1, 0, nil)
		m := settle(t, env)
		if err := evict("dry-a", &metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
			t.Fatal(err)
		}
		requireNothingWritten(t, env, m)
		if got, err := budgets.Get(ctx, "dry", metav1.GetOptions{}); err != nil || got.ResourceVersion != before.ResourceVersion {
			t.Errorf("budget after a dry run: %v %+v", err, got)
		}
	})
}
