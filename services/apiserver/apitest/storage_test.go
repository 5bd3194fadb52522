package apitest

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/cairn-dev/cairn/schemas"
	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
)

func testClaim(name, size string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}},
		},
	}
}

func testVolume(name, size string) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)},
			AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/srv/" + name}},
		},
	}
}

func testClass(name string, isDefault, expand bool) *storagev1.StorageClass {
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: "hostpath.csi.cairn.dev", AllowVolumeExpansion: &expand}
	if isDefault {
		sc.Annotations = map[string]string{schemas.AnnotationDefaultStorageClass: "true"}
	}
	return sc
}

// waitDefaultClass waits until the DefaultStorageClass plugin gives new
// claims class want (its cache follows the log), with dry-run creates that
// write nothing.
func waitDefaultClass(t *testing.T, cs kubernetes.Interface, want string) {
	t.Helper()
	ctx := ctxFor(t, 30*time.Second)
	for {
		got, err := cs.CoreV1().PersistentVolumeClaims("default").Create(ctx, testClaim("probe", "1Gi"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			t.Fatalf("dry-run claim: %v", err)
		}
		if c := got.Spec.StorageClassName; c != nil && *c == want {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("default class never became %q (last %v)", want, got.Spec.StorageClassName)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func TestStorageAdmission(t *testing.T) {
	env := controlplanetest.Start(t, controlplanetest.Options{})
	cs := env.Client
	ctx := ctxFor(t, 60*time.Second)
	claims := cs.CoreV1().PersistentVolumeClaims("default")

	// No default class: the claim keeps no class, and gets its finalizer.
	c, err := claims.Create(ctx, testClaim("plain", "1Gi"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Spec.StorageClassName != nil || !slices.Equal(c.Finalizers, []string{schemas.PVCProtectionFinalizer}) ||
		c.Status.Phase != corev1.ClaimPending || *c.Spec.VolumeMode != corev1.PersistentVolumeFilesystem {
		t.Errorf("claim without a default class: %+v %+v", c.ObjectMeta, c.Spec)
	}
	pv, err := cs.CoreV1().PersistentVolumes().Create(ctx, testVolume("pv-a", "5Gi"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(pv.Finalizers, []string{schemas.PVProtectionFinalizer}) || pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimRetain ||
		pv.Status.Phase != corev1.VolumePending || pv.Status.LastPhaseTransitionTime == nil {
		t.Errorf("volume: %+v %+v", pv.ObjectMeta, pv.Status)
	}

	// Two defaults: the newest wins; an explicit "" keeps no class.
	if _, err := cs.StorageV1().StorageClasses().Create(ctx, testClass("old", true, false), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitDefaultClass(t, cs, "old")
	time.Sleep(1100 * time.Millisecond) // creation timestamps have second resolution
	if _, err := cs.StorageV1().StorageClasses().Create(ctx, testClass("fast", true, true), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitDefaultClass(t, cs, "fast")
	c, err = claims.Create(ctx, testClaim("data", "1Gi"), metav1.CreateOptions{})
	if err != nil || c.Spec.StorageClassName == nil || *c.Spec.StorageClassName != "fast" {
		t.Fatalf("claim with defaults: %v %v", err, c)
	}
	none := testClaim("static", "1Gi")
	none.Spec.StorageClassName = new(string)
	if c, err := claims.Create(ctx, none, metav1.CreateOptions{}); err != nil || *c.Spec.StorageClassName != "" {
		t.Errorf("claim asking for no class: %v %v", err, c)
	}

	// Growth: refused while the claim is not bound (validation: the spec
	// is immutable), allowed once bound on a class that allows it, refused
	// (403) on one that does not; shrinking is 422.
	grow := func(name, size string) error {
		patch := []byte(`{"spec":{"resources":{"requests":{"storage":"` + size + `"}}}}`)
		_, err := claims.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
		return err
	}
	wantInvalid(t, env, "", "PersistentVolumeClaim", []string{"spec"}, func() error { return grow("data", "2Gi") })
	bind(t, ctx, cs, "data", "1Gi")
	if err := grow("data", "2Gi"); err != nil {
		t.Errorf("grow a bound claim on an expandable class: %v", err)
	}
	wantInvalid(t, env, "", "PersistentVolumeClaim", []string{"spec.resources.requests.storage"}, func() error { return grow("data", "1Gi") })

	slow := testClaim("slow", "1Gi")
	slow.Spec.StorageClassName = ptr("old")
	if _, err := claims.Create(ctx, slow, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	bind(t, ctx, cs, "slow", "1Gi")
	before := settle(t, env)
	err = grow("slow", "3Gi")
	if !apierrors.IsForbidden(err) || err.Error() != `persistentvolumeclaims "slow" is forbidden: only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc must support resize` {
		t.Errorf("grow on a class without expansion: %v", err)
	}
	requireNothingWritten(t, env, before)
}

// bind sets a claim's status as the PV controller would.
func bind(t *testing.T, ctx context.Context, cs kubernetes.Interface, name, size string) {
	t.Helper()
	c, err := cs.CoreV1().PersistentVolumeClaims("default").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c.Spec.VolumeName = "pv-" + name
	if c, err = cs.CoreV1().PersistentVolumeClaims("default").Update(ctx, c, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("set volumeName: %v", err)
	}
	c.Status = corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound, AccessModes: c.Spec.AccessModes,
		Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}}
	if _, err := cs.CoreV1().PersistentVolumeClaims("default").UpdateStatus(ctx, c, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("bind: %v", err)
	}
}

func TestStorageBadInput(t *testing.T) {
	env := controlplanetest.Start(t, controlplanetest.Options{})
	cs := env.Client
	ctx := ctxFor(t, 60*time.Second)
	claims := cs.CoreV1().PersistentVolumeClaims("default")
	create := func(c *corev1.PersistentVolumeClaim) func() error {
		return func() error { _, err := claims.Create(ctx, c, metav1.CreateOptions{}); return err }
	}
	noModes := testClaim("a", "1Gi")
	noModes.Spec.AccessModes = nil
	badMode := testClaim("b", "1Gi")
	badMode.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{"ReadWriteSometimes"}
	noSize := testClaim("c", "1Gi")
	noSize.Spec.Resources.Requests = nil
	pvNoSource := testVolume("pv-x", "1Gi")
	pvNoSource.Spec.HostPath = nil
	pvBadReclaim := testVolume("pv-y", "1Gi")
	pvBadReclaim.Spec.PersistentVolumeReclaimPolicy = "Keep"
	runInvalidCases(t, env, "", "PersistentVolumeClaim", []invalidCase{
		{"no access modes", create(noModes), []string{"spec.accessModes"}},
		{"invalid access mode", create(badMode), []string{"spec.accessModes"}},
		{"no storage request", create(noSize), []string{"spec.resources[storage]"}},
	})
	runInvalidCases(t, env, "", "PersistentVolume", []invalidCase{
		{"no source", func() error {
			_, err := cs.CoreV1().PersistentVolumes().Create(ctx, pvNoSource, metav1.CreateOptions{})
			return err
		}, []string{"spec"}},
		{"bad reclaim policy", func() error {
			_, err := cs.CoreV1().PersistentVolumes().Create(ctx, pvBadReclaim, metav1.CreateOptions{})
			return err
		}, []string{"spec.persistentVolumeReclaimPolicy"}},
	})
	badClass := testClass("bad", false, false)
	badClass.Provisioner = ""
	badClass.VolumeBindingMode = ptr(storagev1.VolumeBindingMode("Later"))
	runInvalidCases(t, env, "storage.k8s.io", "StorageClass", []invalidCase{
		{"no provisioner, bad binding mode", func() error {
			_, err := cs.StorageV1().StorageClasses().Create(ctx, badClass, metav1.CreateOptions{})
			return err
		}, []string{"provisioner", "volumeBindingMode"}},
	})
	// A class's parameters are immutable.
	sc, err := cs.StorageV1().StorageClasses().Create(ctx, testClass("standard", false, false), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if *sc.ReclaimPolicy != corev1.PersistentVolumeReclaimDelete || *sc.VolumeBindingMode != storagev1.VolumeBindingImmediate {
		t.Errorf("class defaults: %+v", sc)
	}
	sc.Parameters = map[string]string{"tier": "gold"}
	runInvalidCases(t, env, "storage.k8s.io", "StorageClass", []invalidCase{
		{"parameters changed", func() error {
			_, err := cs.StorageV1().StorageClasses().Update(ctx, sc, metav1.UpdateOptions{})
			return err
		}, []string{"parameters"}},
	})
}

func TestStorageTables(t *testing.T) {
	env := controlplanetest.Start(t, controlplanetest.Options{})
	cs := env.Client
	ctx := ctxFor(t, 60*time.Second)
	if _, err := cs.StorageV1().StorageClasses().Create(ctx, testClass("standard", true, true), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cols, rows := tableOf(t, env, "/apis/storage.k8s.io/v1/storageclasses")
	if want := []string{"Name", "Provisioner", "ReclaimPolicy", "VolumeBindingMode", "AllowVolumeExpansion", "Age"}; !slices.Equal(cols, want) {
		t.Errorf("sc columns %v", cols)
	}
	if len(rows) != 1 || rows[0][0] != "standard (default)" || rows[0][3] != "Immediate" || rows[0][4] != true {
		t.Errorf("sc rows %v", rows)
	}
	if _, err := cs.CoreV1().PersistentVolumes().Create(ctx, testVolume("pv-1", "2Gi"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cols, rows = tableOf(t, env, "/api/v1/persistentvolumes")
	if want := []string{"Name", "Capacity", "Access Modes", "Reclaim Policy", "Status", "Claim", "StorageClass", "VolumeAttributesClass", "Reason", "Age", "VolumeMode"}; !slices.Equal(cols, want) {
		t.Errorf("pv columns %v", cols)
	}
	if len(rows) != 1 || !slices.Equal(rows[0][:7], []any{"pv-1", "2Gi", "RWO", "Retain", "Pending", "", ""}) {
		t.Errorf("pv rows %v", rows)
	}
	// The field selector kube supports on claims and volumes: name.
	r := do(t, env, call{method: "GET", path: "/api/v1/persistentvolumes?fieldSelector=name%3Dpv-1"})
	if r.code != 200 {
		t.Errorf("field selector name: %d %s", r.code, r.body)
	}
}
