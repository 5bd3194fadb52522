package volumeadmission

import (
	"context"
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/cairn-dev/cairn/schemas"
	"github.com/cairn-dev/cairn/services/apiserver"
)

// Plugins are the three plugins over classes, in kube's order.
func Plugins(classes *Classes) []apiserver.AdmissionPlugin {
	return []apiserver.AdmissionPlugin{&DefaultStorageClass{Classes: classes}, &PersistentVolumeClaimResize{Classes: classes},
		StorageObjectInUseProtection{}}
}

var (
	_ apiserver.AdmissionPlugin = (*DefaultStorageClass)(nil)
	_ apiserver.AdmissionPlugin = (*PersistentVolumeClaimResize)(nil)
	_ apiserver.AdmissionPlugin = StorageObjectInUseProtection{}
)

// isCore reports whether a is a write of the core/v1 plural itself (not a
// subresource).
func isCore(a *apiserver.AdmissionRequest, plural, op string) bool {
	return a.Resource.GroupVersion.Group == "" && a.Resource.Plural == plural && a.Subresource == "" && a.Operation == op
}

// DefaultStorageClass is kube's DefaultStorageClass plugin.
type DefaultStorageClass struct{ Classes *Classes }

// Name implements apiserver.AdmissionPlugin.
func (*DefaultStorageClass) Name() string { return "DefaultStorageClass" }

// Admit implements apiserver.AdmissionPlugin.
func (p *DefaultStorageClass) Admit(_ context.Context, a *apiserver.AdmissionRequest) error {
	if !isCore(a, "persistentvolumeclaims", "CREATE") {
		return nil
	}
	pvc, ok := a.Object.(*corev1.PersistentVolumeClaim)
	if !ok || schemas.ClaimHasClass(pvc) {
		return nil
	}
	if def, ok := p.Classes.Default(); ok {
		pvc.Spec.StorageClassName = &def.Name
	}
	return nil
}

// StorageObjectInUseProtection is kube's StorageObjectInUseProtection
// plugin.
type StorageObjectInUseProtection struct{}

// Name implements apiserver.AdmissionPlugin.
func (StorageObjectInUseProtection) Name() string { return "StorageObjectInUseProtection" }

// Admit implements apiserver.AdmissionPlugin.
func (StorageObjectInUseProtection) Admit(_ context.Context, a *apiserver.AdmissionRequest) error {
	var finalizer string
	switch {
	case isCore(a, "persistentvolumeclaims", "CREATE"):
		finalizer = schemas.PVCProtectionFinalizer
	case isCore(a, "persistentvolumes", "CREATE"):
		finalizer = schemas.PVProtectionFinalizer
	default:
		return nil
	}
	if fs := a.Object.GetFinalizers(); !slices.Contains(fs, finalizer) {
		a.Object.SetFinalizers(append(fs, finalizer))
	}
	return nil
}

// PersistentVolumeClaimResize is kube's PersistentVolumeClaimResize
// plugin.
type PersistentVolumeClaimResize struct{ Classes *Classes }

// Name implements apiserver.AdmissionPlugin.
func (*PersistentVolumeClaimResize) Name() string { return "PersistentVolumeClaimResize" }

// Admit implements apiserver.AdmissionPlugin.
func (p *PersistentVolumeClaimResize) Admit(ctx context.Context, a *apiserver.AdmissionRequest) error {
	if !isCore(a, "persistentvolumeclaims", "UPDATE") {
		return nil
	}
	pvc, ok1 := a.Object.(*corev1.PersistentVolumeClaim)
	old, ok2 := a.OldObject.(*corev1.PersistentVolumeClaim)
	if !ok1 || !ok2 {
		return nil
	}
	oldSize := old.Spec.Resources.Requests[corev1.ResourceStorage]
	newSize := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	if newSize.Cmp(oldSize) <= 0 {
		return nil
	}
	// kube validates the claim before this plugin runs: an invalid update
	// gets validation's 422, not this plugin's 403.
	if a.Resource.ValidateUpdate != nil && len(a.Resource.ValidateUpdate(pvc, old)) > 0 {
		return nil
	}
	if old.Status.Phase != corev1.ClaimBound {
		return forbidden(a, "Only bound persistent volume claims can be expanded")
	}
	allowed, err := p.allowResize(ctx, pvc, old)
	if err != nil {
		return err
	}
	if !allowed {
		return forbidden(a, "only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc must support resize")
	}
	return nil
}

// allowResize: the claim keeps its class, and the class allows expansion.
func (p *PersistentVolumeClaimResize) allowResize(ctx context.Context, pvc, old *corev1.PersistentVolumeClaim) (bool, error) {
	class := schemas.ClaimClass(pvc)
	if class == "" || schemas.ClaimClass(old) != class {
		return false, nil
	}
	sc, err := p.Classes.Get(ctx, class)
	var st apierrors.APIStatus
	if errors.As(err, &st) && apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("volumeadmission: storage class %s: %w", class, err)
	}
	return sc.AllowVolumeExpansion, nil
}

func forbidden(a *apiserver.AdmissionRequest, msg string) error {
	return apierrors.NewForbidden(a.Resource.GroupResource(), a.Name, errors.New(msg))
}
