package ephemeral

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cairn-dev/cairn/events/consumer/consumertest"
	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func claimSpec() corev1.PersistentVolumeClaimSpec {
	return corev1.PersistentVolumeClaimSpec{
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
	}
}

func podWithScratch(name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "c", Image: "busybox", VolumeMounts: []corev1.VolumeMount{{Name: "scratch", MountPath: "/s"}}}},
		Volumes: []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{
			VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"tier": "scratch"}, Annotations: map[string]string{"note": "x"}},
				Spec:       claimSpec(),
			}}}}},
	}}
}

// TestEphemeral: a pod's ephemeral volume gets the claim POD-VOLUME from
// its template, controlled by the pod, and again when that claim is
// deleted while the pod lives; a claim of that name the pod does not own
// is left alone, with a Warning Event on the pod.
func TestEphemeral(t *testing.T) {
	env := controlplanetest.Start(t)
	m := consumertest.Manager(t, env, controlplanetest.ControllerToken, controlplanetest.Logger("EPH_TEST_LOG"), nil)
	if _, err := New(m, Options{}); err != nil {
		t.Fatal(err)
	}
	controlplanetest.RunSynced(t, m)
	ctx := context.Background()
	claims := env.Client.CoreV1().PersistentVolumeClaims("default")
	pods := env.Client.CoreV1().Pods("default")

	foreign := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "q-scratch"}, Spec: claimSpec()}
	if _, err := claims.Create(ctx, foreign, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p, err := pods.Create(ctx, podWithScratch("p"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pods.Create(ctx, podWithScratch("q"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var made *corev1.PersistentVolumeClaim
	controlplanetest.Eventually(t, 30*time.Second, "claim p-scratch created", func() bool {
		made, err = claims.Get(ctx, "p-scratch", metav1.GetOptions{})
		return err == nil
	})
	ref := metav1.GetControllerOf(made)
	if ref == nil || ref.UID != p.UID || ref.Kind != "Pod" || ref.BlockOwnerDeletion == nil || !*ref.BlockOwnerDeletion ||
		made.Labels["tier"] != "scratch" || made.Annotations["note"] != "x" || made.Spec.Resources.Requests.Storage().String() != "1Gi" {
		t.Errorf("claim p-scratch: %+v %+v", made.ObjectMeta, made.Spec)
	}

	controlplanetest.Eventually(t, 30*time.Second, "Warning Event on pod q", func() bool {
		evs, err := env.Client.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=q"})
		if err != nil {
			return false
		}
		for _, e := range evs.Items {
			if e.Type == corev1.EventTypeWarning && e.Reason == "FailedBinding" && strings.Contains(e.Message, "pod is not owner") {
				return true
			}
		}
		return false
	})
	if q, err := claims.Get(ctx, "q-scratch", metav1.GetOptions{}); err != nil || len(q.OwnerReferences) != 0 {
		t.Errorf("foreign claim: %v %+v", err, q)
	}

	// Deleted while the pod lives: made again (the finalizer of
	// StorageObjectInUseProtection is lifted first: no pvc-protection here).
	made.Finalizers = nil
	if _, err := claims.Update(ctx, made, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := claims.Delete(ctx, "p-scratch", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	controlplanetest.Eventually(t, 30*time.Second, "claim p-scratch made again", func() bool {
		again, err := claims.Get(ctx, "p-scratch", metav1.GetOptions{})
		return err == nil && again.UID != made.UID && metav1.IsControlledBy(again, p)
	})
}
