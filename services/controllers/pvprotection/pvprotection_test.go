package pvprotection

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

// TestPVProtection: a Bound volume being deleted stays until it is no
// longer Bound; an unbound one goes at once; a volume that lost its
// finalizer gets it back.
func TestPVProtection(t *testing.T) {
	env := controlplanetest.Start(t)
	m := consumertest.Manager(t, env, controlplanetest.ControllerToken, controlplanetest.Logger("PV_TEST_LOG"), nil)
	if _, err := New(m, Options{}); err != nil {
		t.Fatal(err)
	}
	controlplanetest.RunSynced(t, m)
	ctx := context.Background()
	pvs := env.Client.CoreV1().PersistentVolumes()
	for _, n := range []string{"bound", "free", "bare"} {
		pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: n}, Spec: corev1.PersistentVolumeSpec{
			Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/srv/" + n}}}}
		if _, err := pvs.Create(ctx, pv, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	setPhase := func(name string, phase corev1.PersistentVolumePhase) {
		pv, err := pvs.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pv.Status.Phase = phase
		if _, err := pvs.UpdateStatus(ctx, pv, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	gone := func(name string) bool {
		_, err := pvs.Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}
	setPhase("bound", corev1.VolumeBound)

	pv, err := pvs.Get(ctx, "bare", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pv.Finalizers = nil
	if _, err := pvs.Update(ctx, pv, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	controlplanetest.Eventually(t, 30*time.Second, "finalizer added back", func() bool {
		pv, err := pvs.Get(ctx, "bare", metav1.GetOptions{})
		return err == nil && slices.Equal(pv.Finalizers, []string{schemas.PVProtectionFinalizer})
	})

	for _, n := range []string{"bound", "free"} {
		if err := pvs.Delete(ctx, n, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	controlplanetest.Eventually(t, 30*time.Second, "unbound volume deleted", func() bool { return gone("free") })
	if err := m.WaitForLog(ctx); err != nil {
		t.Fatal(err)
	}
	if pv, err := pvs.Get(ctx, "bound", metav1.GetOptions{}); err != nil || pv.DeletionTimestamp == nil {
		t.Fatalf("bound volume: %v %+v", err, pv)
	}
	setPhase("bound", corev1.VolumeReleased)
	controlplanetest.Eventually(t, 30*time.Second, "released volume deleted", func() bool { return gone("bound") })
}
