package pvcprotection

import (
	"context"
	"slices"
	"testing"
	"time"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cairn-dev/cairn/events/consumer/consumertest"
	"github.com/cairn-dev/cairn/schemas"
	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func claim(name string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PersistentVolumeClaimSpec{
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
	}}
}

func podWith(name, node string, claims ...string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{NodeName: node,
		Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	for _, c := range claims {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: c,
			VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: c}}})
	}
	return p
}

// TestPVCProtection: a claim deleted while a scheduled pod uses it stays
// Terminating, also after that pod succeeded, until the pod is deleted;
// one used only by an unscheduled pod, or by none, goes at once; a claim
// that lost its finalizer gets it back.
func TestPVCProtection(t *testing.T) {
	env := controlplanetest.Start(t)
	m := consumertest.Manager(t, env, controlplanetest.ControllerToken, controlplanetest.Logger("PVC_TEST_LOG"), nil)
	if _, err := New(m, Options{}); err != nil {
		t.Fatal(err)
	}
	controlplanetest.RunSynced(t, m)
	ctx := context.Background()
	claims := env.Client.CoreV1().PersistentVolumeClaims("default")
	pods := env.Client.CoreV1().Pods("default")
	for _, n := range []string{"used", "pending", "free", "bare"} {
		if _, err := claims.Create(ctx, claim(n), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pods.Create(ctx, podWith("runner", "node-1", "used"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := pods.Create(ctx, podWith("waiter", "", "pending"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	gone := func(name string) bool {
		_, err := claims.Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}

	// The finalizer comes back when removed.
	c, err := claims.Get(ctx, "bare", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c.Finalizers = nil
	if _, err := claims.Update(ctx, c, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	controlplanetest.Eventually(t, 30*time.Second, "finalizer added back", func() bool {
		c, err := claims.Get(ctx, "bare", metav1.GetOptions{})
		return err == nil && slices.Equal(c.Finalizers, []string{schemas.PVCProtectionFinalizer})
	})

	for _, n := range []string{"used", "pending", "free"} {
		if err := claims.Delete(ctx, n, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	controlplanetest.Eventually(t, 30*time.Second, "unused claims deleted", func() bool { return gone("pending") && gone("free") })
	c, err = claims.Get(ctx, "used", metav1.GetOptions{})
	if err != nil || c.DeletionTimestamp == nil || !slices.Contains(c.Finalizers, schemas.PVCProtectionFinalizer) {
		t.Fatalf("claim in use: %v %+v", err, c)
	}

	// A pod that ran to completion still holds its claim, as in kube.
	p, err := pods.Get(ctx, "runner", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Status.Phase = corev1.PodSucceeded
	if _, err := pods.UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	controlplanetest.WaitForLog(t, env)
	if err := m.WaitForLog(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // let a reconcile that would be wrong happen
	if gone("used") {
		t.Fatal("claim of a succeeded pod that still exists was deleted")
	}
	if err := pods.Delete(ctx, "runner", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	controlplanetest.Eventually(t, 30*time.Second, "claim deleted once its pod is gone", func() bool { return gone("used") })
}

func TestPodUsesClaim(t *testing.T) {
	pvc := claim("p-data")
	pvc.Namespace = "ns"
	owned := pvc.DeepCopy()
	yes := true
	eph := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u1"}, Spec: corev1.PodSpec{NodeName: "n",
		Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}}}}}
	owned.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "p", UID: "u1", Controller: &yes}}
	shut := eph.DeepCopy()
	now := metav1.Now()
	shut.DeletionTimestamp, shut.DeletionGracePeriodSeconds = &now, new(int64)
	direct := podWith("q", "n", "p-data")
	direct.Namespace = "ns"
	unscheduled := podWith("r", "", "p-data")
	unscheduled.Namespace = "ns"
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		pvc  *corev1.PersistentVolumeClaim
		want bool
	}{
		{"by name", direct, pvc, true},
		{"unscheduled", unscheduled, pvc, false},
		{"ephemeral owned by the pod", eph, owned, true},
		{"ephemeral not owned by the pod", eph, pvc, false},
		{"ephemeral of a shut-down pod", shut, owned, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := PodUsesClaim(tc.pod, tc.pvc); got != tc.want {
				t.Errorf("PodUsesClaim = %v, want %v", got, tc.want)
			}
		})
	}
}
