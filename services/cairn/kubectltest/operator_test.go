package kubectltest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/cairn-dev/cairn/services/cairn/cairntest"
)

// ovenCRDYAML is the operator's definition: an Oven runs spec.replicas
// copies of a Deployment and reports them in its status subresource.
const ovenCRDYAML = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: ovens.example.cairn.dev
spec:
  group: example.cairn.dev
  scope: Namespaced
  names: {plural: ovens, singular: oven, kind: Oven}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [replicas]
            properties:
              replicas: {type: integer, minimum: 0}
          status:
            type: object
            properties:
              replicas: {type: integer}
              deployment: {type: string}
`

var ovenGVK = schema.GroupVersionKind{Group: "example.cairn.dev", Version: "v1", Kind: "Oven"}

func newOven() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(ovenGVK)
	return u
}

// ovenReconciler is the operator: an Oven becomes a Deployment it
// controls, and the Deployment's replicas its status.
type ovenReconciler struct{ c crclient.Client }

func (r ovenReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	oven := newOven()
	if err := r.c.Get(ctx, req.NamespacedName, oven); err != nil {
		return ctrl.Result{}, crclient.IgnoreNotFound(err)
	}
	if oven.GetDeletionTimestamp() != nil {
		return ctrl.Result{}, nil
	}
	replicas, _, _ := unstructured.NestedInt64(oven.Object, "spec", "replicas")
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: req.Namespace, Name: "oven-" + req.Name}}
	_, err := controllerutil.CreateOrUpdate(ctx, r.c, dep, func() error {
		labels := map[string]string{"oven": req.Name}
		dep.Spec.Replicas = ptr.To(int32(replicas))
		dep.Spec.Selector = &metav1.LabelSelector{MatchLabels: labels}
		dep.Spec.Template.Labels = labels
		dep.Spec.Template.Spec.Containers = []corev1.Container{{Name: "heat", Image: "busybox", Command: []string{"sleep", "3600"}}}
		return controllerutil.SetControllerReference(oven, dep, r.c.Scheme())
	})
	if err != nil {
		return ctrl.Result{}, err
	}
	status := map[string]any{"replicas": int64(dep.Status.Replicas), "deployment": dep.Name}
	if old, _, _ := unstructured.NestedMap(oven.Object, "status"); fmt.Sprint(old) == fmt.Sprint(status) {
		return ctrl.Result{}, nil
	}
	if err := unstructured.SetNestedMap(oven.Object, status, "status"); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, r.c.Status().Update(ctx, oven)
}

// TestOperator runs a controller-runtime operator against `cairn up`
// (its controller manager included): an Oven becomes a Deployment
// (controller owner reference, blockOwnerDeletion) that follows its
// spec.replicas; the operator writes the Deployment's replicas through the
// status subresource; deleting the Oven lets the garbage collector delete
// the Deployment (the CRD is established after the collector started);
// and the Oven's timeline shows the Deployment, its ReplicaSet and its
// pods as its effects.
func TestOperator(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cairn and runs cairn up; skipped with -short")
	}
	ctrllog.SetLogger(logr.Discard())
	kubectl := cairntest.KubectlPath(t)
	bin := cairntest.Build(t)
	dir := t.TempDir()
	c := startCluster(t, t, bin, kubectl, filepath.Join(dir, "data"), cairntest.FreeAddr(t), filepath.Join(dir, "home"))
	crd := filepath.Join(dir, "crd.yaml")
	if err := os.WriteFile(crd, []byte(ovenCRDYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	c.OK(t, "apply", "-f", crd)
	c.OK(t, "wait", "--for=condition=Established", "--timeout=30s", "crd/ovens.example.cairn.dev")

	rc, err := clientcmd.BuildConfigFromFlags("", c.Up.Kubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	mgr, err := ctrl.NewManager(rc, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := ctrl.NewControllerManagedBy(mgr).For(newOven()).Owns(&appsv1.Deployment{}).
		Complete(ovenReconciler{mgr.GetClient()}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("operator: %v", err)
		}
	})

	cl, err := crclient.New(rc, crclient.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	oven := newOven()
	oven.SetNamespace("default")
	oven.SetName("o1")
	_ = unstructured.SetNestedField(oven.Object, int64(2), "spec", "replicas")
	if err := cl.Create(ctx, oven); err != nil {
		t.Fatalf("create oven: %v", err)
	}
	key := crclient.ObjectKey{Namespace: "default", Name: "oven-o1"}
	dep := &appsv1.Deployment{}
	untilOK(t, "the Deployment with 2 replicas", func() error {
		if err := cl.Get(ctx, key, dep); err != nil {
			return err
		}
		if dep.Spec.Replicas == nil || *dep.Spec.Replicas != 2 {
			return fmt.Errorf("replicas %v", dep.Spec.Replicas)
		}
		return nil
	})
	ref := metav1.GetControllerOf(dep)
	if ref == nil || ref.Kind != "Oven" || ref.Name != "o1" || ref.UID != oven.GetUID() || !ptr.Deref(ref.BlockOwnerDeletion, false) {
		t.Errorf("controller reference = %+v", ref)
	}
	// The deployment and replicaset controllers make 2 pods (pending: no
	// node); the operator reports them through the status subresource.
	ovenStatus := func(want int64) func() error {
		return func() error {
			got := newOven()
			if err := cl.Get(ctx, crclient.ObjectKey{Namespace: "default", Name: "o1"}, got); err != nil {
				return err
			}
			n, _, _ := unstructured.NestedInt64(got.Object, "status", "replicas")
			d, _, _ := unstructured.NestedString(got.Object, "status", "deployment")
			if n != want || d != "oven-o1" {
				return fmt.Errorf("status %v", got.Object["status"])
			}
			return nil
		}
	}
	untilOK(t, "the Oven's status to show 2 replicas", ovenStatus(2))

	patch := []byte(`{"spec":{"replicas":3}}`)
	if err := cl.Patch(ctx, oven, crclient.RawPatch("application/merge-patch+json", patch)); err != nil {
		t.Fatalf("patch oven: %v", err)
	}
	untilOK(t, "the Deployment to follow to 3 replicas", func() error {
		if err := cl.Get(ctx, key, dep); err != nil {
			return err
		}
		if *dep.Spec.Replicas != 3 {
			return fmt.Errorf("replicas %d", *dep.Spec.Replicas)
		}
		return nil
	})
	untilOK(t, "the Oven's status to show 3 replicas", ovenStatus(3))

	kc := []string{"KUBECONFIG=" + c.Up.Kubeconfig()}
	eventuallyOut(t, "cairn timeline oven/o1", func() (string, error) {
		return resultOut(cairntest.RunIn(t, callTimeout, dir, kc, bin, "timeline", "oven/o1"))
	}, "Oven default/o1", "Deployment default/oven-o1", "ReplicaSet default/oven-o1-", "Pod default/oven-o1-")

	if err := cl.Delete(ctx, oven); err != nil {
		t.Fatalf("delete oven: %v", err)
	}
	untilOK(t, "the garbage collector to delete the Deployment", func() error {
		err := cl.Get(ctx, key, &appsv1.Deployment{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there: %v", err)
	})
}

// untilOK waits (waitFor, a generous minute) for cond to return nil.
func untilOK(t *testing.T, what string, cond func() error) {
	t.Helper()
	var err error
	if !waitFor(time.Minute, func() bool { err = cond(); return err == nil }) {
		t.Fatalf("timed out waiting for %s: %v", what, err)
	}
}
