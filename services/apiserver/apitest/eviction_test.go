package apitest

import (
	"net/http"
	"testing"
	"time"

	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
)

// TestEviction covers POST pods/eviction (policy/v1 Eviction), what
// kubectl drain sends, for pods no PodDisruptionBudget covers: it deletes
// the pod as its deleteOptions say (TestEvictionBudget has the budgets).
func TestEviction(t *testing.T) {
	env := controlplanetest.Start(t)
	ctx := ctxFor(t, 60*time.Second)
	pods := env.Client.CoreV1().Pods("default")
	evictions := env.Client.PolicyV1().Evictions("default")
	eviction := func(name string, opts *metav1.DeleteOptions) *policyv1.Eviction {
		return &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, DeleteOptions: opts}
	}

	t.Run("discovery", func(t *testing.T) {
		l, err := env.Client.Discovery().ServerResourcesForGroupVersion("v1")
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, r := range l.APIResources {
			if r.Name == "pods/eviction" {
				found = r.Group == "policy" && r.Version == "v1" && r.Kind == "Eviction"
			}
		}
		if !found {
			t.Errorf("pods/eviction is not listed as policy/v1 Eviction, as kubectl drain looks for it")
		}
	})

	t.Run("an unbound pod goes at once", func(t *testing.T) {
		if _, err := pods.Create(ctx, testPod("ev1"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := evictions.Evict(ctx, eviction("ev1", nil)); err != nil {
			t.Fatal(err)
		}
		if _, err := pods.Get(ctx, "ev1", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("get after eviction: %v, want NotFound", err)
		}
	})

	t.Run("a bound pod gets its grace period, or the eviction's", func(t *testing.T) {
		p := testPod("ev2")
		p.Spec.NodeName = "n1"
		if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := evictions.Evict(ctx, eviction("ev2", nil)); err != nil {
			t.Fatal(err)
		}
		got, err := pods.Get(ctx, "ev2", metav1.GetOptions{})
		if err != nil || got.DeletionTimestamp == nil || got.DeletionGracePeriodSeconds == nil || *got.DeletionGracePeriodSeconds != 30 {
			t.Fatalf("bound pod after eviction: %v, %+v", err, got)
		}
		zero := int64(0)
		if err := evictions.Evict(ctx, eviction("ev2", &metav1.DeleteOptions{GracePeriodSeconds: &zero})); err != nil {
			t.Fatal(err)
		}
		if _, err := pods.Get(ctx, "ev2", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("get after an eviction with grace period 0: %v, want NotFound", err)
		}
	})

	t.Run("dry run and preconditions", func(t *testing.T) {
		if _, err := pods.Create(ctx, testPod("ev3"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := evictions.Evict(ctx, eviction("ev3", &metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})); err != nil {
			t.Fatal(err)
		}
		if _, err := pods.Get(ctx, "ev3", metav1.GetOptions{}); err != nil {
			t.Errorf("a dry-run eviction deleted the pod: %v", err)
		}
		uid := types.UID("not-the-uid")
		err := evictions.Evict(ctx, eviction("ev3", &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}))
		if !apierrors.IsConflict(err) {
			t.Errorf("eviction with a wrong UID precondition: %v, want Conflict", err)
		}
	})

	t.Run("bad input", func(t *testing.T) {
		if err := evictions.Evict(ctx, eviction("missing", nil)); !apierrors.IsNotFound(err) {
			t.Errorf("eviction of a missing pod: %v, want NotFound", err)
		}
		m := settle(t, env)
		r := do(t, env, call{method: http.MethodPost, path: "/api/v1/namespaces/default/pods/ev3/eviction",
			body: mustJSON(t, eviction("other", nil))})
		if st := status(t, r); r.code != http.StatusBadRequest || st.Reason != metav1.StatusReasonBadRequest {
			t.Errorf("eviction naming another pod: %d %s", r.code, r.body)
		}
		r = do(t, env, call{method: http.MethodPost, path: "/api/v1/namespaces/default/pods/ev3/eviction", body: []byte(`{"apiVersion":`)})
		if status(t, r); r.code != http.StatusBadRequest {
			t.Errorf("malformed eviction: %d %s", r.code, r.body)
		}
		r = do(t, env, call{method: http.MethodGet, path: "/api/v1/namespaces/default/pods/ev3/eviction"})
		if status(t, r); r.code != http.StatusMethodNotAllowed {
			t.Errorf("GET pods/eviction: %d %s", r.code, r.body)
		}
		requireNothingWritten(t, env, m)
		if _, err := pods.Get(ctx, "ev3", metav1.GetOptions{}); err != nil {
			t.Errorf("bad evictions deleted the pod: %v", err)
		}
	})
}
