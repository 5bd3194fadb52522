package namespace

import (
	"context"
	"slices"
	"testing"
	"time"

	"go.uber.org/goleak"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/cairn-dev/cairn/events/consumer/consumertest"
	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const timeout = 30 * time.Second

// start runs a control plane and, if run, the namespace controller.
func start(t *testing.T, run bool) *controlplanetest.Env {
	t.Helper()
	env := controlplanetest.Start(t)
	if !run {
		return env
	}
	m := consumertest.Manager(t, env, controlplanetest.ControllerToken, controlplanetest.Logger("NS_TEST_LOG"), nil)
	if _, err := New(m, Options{}); err != nil {
		t.Fatal(err)
	}
	controlplanetest.Run(t, m)
	return env
}

func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// must(call())(t) is call's value, or a fatal error.
func must[T any](v T, err error) func(*testing.T) T {
	return func(t *testing.T) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func fill(t *testing.T, env *controlplanetest.Env, ns string) {
	t.Helper()
	ctx := context.Background()
	cs := env.Client
	must(cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}))(t)
	for _, name := range []string{"a", "b", "c"} {
		must(cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}))(t)
		must(cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}}}, metav1.CreateOptions{}))(t)
	}
	must(cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}}, metav1.CreateOptions{}))(t)
	zero := int32(0)
	lbls := map[string]string{"app": "x"}
	must(cs.AppsV1().ReplicaSets(ns).Create(ctx, &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "rs"},
		Spec: appsv1.ReplicaSetSpec{Replicas: &zero, Selector: &metav1.LabelSelector{MatchLabels: lbls},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: lbls},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}}}}}, metav1.CreateOptions{}))(t)
}

// release removes the finalizers of configmap ns/name, retrying conflicts
// with the controller's writes.
func release(t *testing.T, env *controlplanetest.Env, ns, name string) {
	t.Helper()
	cms := env.Client.CoreV1().ConfigMaps(ns)
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		cm, err := cms.Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cm.Finalizers = nil
		_, err = cms.Update(context.Background(), cm, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("release %s/%s: %v", ns, name, err)
	}
}

func nsGone(env *controlplanetest.Env, ns string) func() bool {
	return func() bool {
		_, err := env.Client.CoreV1().Namespaces().Get(context.Background(), ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}
}

func condition(ns *corev1.Namespace, t corev1.NamespaceConditionType) *corev1.NamespaceCondition {
	for i := range ns.Status.Conditions {
		if ns.Status.Conditions[i].Type == t {
			return &ns.Status.Conditions[i]
		}
	}
	return nil
}

// TestNamespaceDeletion deletes namespaces with content: the controller
// empties them, waits for what finalizers hold, and finalizes them.
func TestNamespaceDeletion(t *testing.T) {
	env := start(t, true)
	ctx := context.Background()
	cs := env.Client

	t.Run("emptied then gone", func(t *testing.T) {
		fill(t, env, "doomed")
		if err := cs.CoreV1().Namespaces().Delete(ctx, "doomed", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, timeout, "the namespace to go", nsGone(env, "doomed"))
		for _, n := range []int{
			len(must(cs.CoreV1().ConfigMaps("doomed").List(ctx, metav1.ListOptions{}))(t).Items),
			len(must(cs.CoreV1().Pods("doomed").List(ctx, metav1.ListOptions{}))(t).Items),
			len(must(cs.CoreV1().Secrets("doomed").List(ctx, metav1.ListOptions{}))(t).Items),
			len(must(cs.AppsV1().ReplicaSets("doomed").List(ctx, metav1.ListOptions{}))(t).Items),
		} {
			if n != 0 {
				t.Errorf("content left after the namespace went: %d objects", n)
			}
		}
	})

	t.Run("held by a finalizer", func(t *testing.T) {
		fill(t, env, "held")
		must(cs.CoreV1().ConfigMaps("held").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "keep",
			Finalizers: []string{"test.cairn.dev/hold"}}}, metav1.CreateOptions{}))(t)
		if err := cs.CoreV1().Namespaces().Delete(ctx, "held", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, timeout, "everything but the held configmap to go", func() bool {
			cms := must(cs.CoreV1().ConfigMaps("held").List(ctx, metav1.ListOptions{}))(t).Items
			pods := must(cs.CoreV1().Pods("held").List(ctx, metav1.ListOptions{}))(t).Items
			return len(cms) == 1 && cms[0].Name == "keep" && cms[0].DeletionTimestamp != nil && len(pods) == 0
		})
		var ns *corev1.Namespace
		eventually(t, timeout, "the conditions to tell what remains", func() bool {
			ns = must(cs.CoreV1().Namespaces().Get(ctx, "held", metav1.GetOptions{}))(t)
			c := condition(ns, corev1.NamespaceFinalizersRemaining)
			return c != nil && c.Status == corev1.ConditionTrue
		})
		if ns.Status.Phase != corev1.NamespaceTerminating || !slices.Contains(ns.Spec.Finalizers, corev1.FinalizerKubernetes) {
			t.Errorf("held namespace: phase %s finalizers %v", ns.Status.Phase, ns.Spec.Finalizers)
		}
		if c := condition(ns, corev1.NamespaceContentRemaining); c == nil || c.Status != corev1.ConditionTrue || c.Message != "Some resources are remaining: configmaps has 1 resource instances" {
			t.Errorf("content condition: %+v", c)
		}
		if c := condition(ns, corev1.NamespaceDeletionDiscoveryFailure); c == nil || c.Status != corev1.ConditionFalse {
			t.Errorf("discovery condition: %+v", c)
		}
		release(t, env, "held", "keep")
		eventually(t, timeout, "the namespace to go", nsGone(env, "held"))
	})

	t.Run("creates refused while terminating", func(t *testing.T) {
		must(cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "late"}}, metav1.CreateOptions{}))(t)
		must(cs.CoreV1().ConfigMaps("late").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "keep",
			Finalizers: []string{"test.cairn.dev/hold"}}}, metav1.CreateOptions{}))(t)
		if err := cs.CoreV1().Namespaces().Delete(ctx, "late", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		_, err := cs.CoreV1().ConfigMaps("late").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "new"}}, metav1.CreateOptions{})
		if !apierrors.IsForbidden(err) {
			t.Errorf("create in a terminating namespace: %v, want Forbidden", err)
		}
		release(t, env, "late", "keep")
		eventually(t, timeout, "the namespace to go", nsGone(env, "late"))
	})
}

// TestFinalizeSubresource drives PUT namespaces/<name>/finalize by hand,
// with no controller.
func TestFinalizeSubresource(t *testing.T) {
	env := start(t, false)
	ctx := context.Background()
	nss := env.Client.CoreV1().Namespaces()

	t.Run("takes only spec.finalizers", func(t *testing.T) {
		ns := must(nss.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "live"}}, metav1.CreateOptions{}))(t)
		ns.Spec.Finalizers = []corev1.FinalizerName{"example.com/mine"}
		ns.Labels = map[string]string{"ignored": "yes"}
		ns.Status.Phase = corev1.NamespaceTerminating
		got := must(nss.Finalize(ctx, ns, metav1.UpdateOptions{}))(t)
		if !slices.Equal(got.Spec.Finalizers, []corev1.FinalizerName{"example.com/mine"}) || got.Labels["ignored"] != "" ||
			got.Status.Phase != corev1.NamespaceActive {
			t.Errorf("after finalize: finalizers %v labels %v phase %s", got.Spec.Finalizers, got.Labels, got.Status.Phase)
		}
		// A stale resourceVersion is a conflict.
		ns.Spec.Finalizers = nil
		if _, err := nss.Finalize(ctx, ns, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
			t.Errorf("finalize with a stale resourceVersion: %v, want Conflict", err)
		}
	})

	t.Run("deletes when the last finalizer goes", func(t *testing.T) {
		must(nss.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "fin"}}, metav1.CreateOptions{}))(t)
		if err := nss.Delete(ctx, "fin", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		ns := must(nss.Get(ctx, "fin", metav1.GetOptions{}))(t)
		if ns.DeletionTimestamp == nil || ns.Status.Phase != corev1.NamespaceTerminating {
			t.Fatalf("deleted namespace: %+v", ns)
		}
		// A status update must not delete it while spec.finalizers holds.
		ns.Status.Conditions = []corev1.NamespaceCondition{{Type: corev1.NamespaceContentRemaining, Status: corev1.ConditionFalse, Reason: "ContentRemoved"}}
		ns = must(nss.UpdateStatus(ctx, ns, metav1.UpdateOptions{}))(t)
		if nsGone(env, "fin")() {
			t.Fatal("a status update deleted the namespace while spec.finalizers held it")
		}
		ns.Spec.Finalizers = nil
		must(nss.Finalize(ctx, ns, metav1.UpdateOptions{}))(t)
		if !nsGone(env, "fin")() {
			t.Error("the namespace is still there with no finalizer left")
		}
	})

	t.Run("only update", func(t *testing.T) {
		err := env.Client.CoreV1().RESTClient().Get().AbsPath("/api/v1/namespaces/live/finalize").Do(ctx).Error()
		if !apierrors.IsMethodNotSupported(err) {
			t.Errorf("GET finalize: %v, want MethodNotSupported", err)
		}
	})
}
