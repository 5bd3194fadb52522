package schemas

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
)

// Storage: core/v1 PersistentVolumes and PersistentVolumeClaims, and
// storage.k8s.io/v1 StorageClasses, CSIDrivers, CSINodes and
// VolumeAttachments, as kube's pkg/registry/core/persistentvolume{,claim}
// and pkg/registry/storage/* serve them: defaults of
// pkg/apis/{core,storage}/v1/defaults.go, strategies, validation
// (validation_storage.go) and printer columns (table_storage.go).

var gvStorage = storagev1.SchemeGroupVersion

// Names shared by the apiserver's storage admission plugins, the
// protection controllers and the volume controllers.
const (
	// AnnotationDefaultStorageClass marks the default StorageClass (value
	// "true"); AnnotationBetaDefaultStorageClass is its older name, still
	// honoured.
	AnnotationDefaultStorageClass     = "storageclass.kubernetes.io/is-default-class"
	AnnotationBetaDefaultStorageClass = "storageclass.beta.kubernetes.io/is-default-class"
	// PVCProtectionFinalizer keeps a claim while a pod uses it;
	// PVProtectionFinalizer keeps a volume while it is bound.
	PVCProtectionFinalizer = "kubernetes.io/pvc-protection"
	PVProtectionFinalizer  = "kubernetes.io/pv-protection"
)

// IsDefaultStorageClass is kube's storageutil.IsDefaultAnnotation.
func IsDefaultStorageClass(m metav1.Object) bool {
	a := m.GetAnnotations()
	return a[AnnotationDefaultStorageClass] == "true" || a[AnnotationBetaDefaultStorageClass] == "true"
}

// ClaimClass is GetPersistentVolumeClaimClass: the beta annotation if set,
// else spec.storageClassName, else "".
func ClaimClass(pvc *corev1.PersistentVolumeClaim) string {
	if c, ok := pvc.Annotations[corev1.BetaStorageClassAnnotation]; ok {
		return c
	}
	if pvc.Spec.StorageClassName != nil {
		return *pvc.Spec.StorageClassName
	}
	return ""
}

// ClaimHasClass is PersistentVolumeClaimHasClass: the claim names a class
// (even "") by the beta annotation or spec.storageClassName.
func ClaimHasClass(pvc *corev1.PersistentVolumeClaim) bool {
	_, ok := pvc.Annotations[corev1.BetaStorageClassAnnotation]
	return ok || pvc.Spec.StorageClassName != nil
}

// VolumeClass is GetPersistentVolumeClass.
func VolumeClass(pv *corev1.PersistentVolume) string {
	if c, ok := pv.Annotations[corev1.BetaStorageClassAnnotation]; ok {
		return c
	}
	return pv.Spec.StorageClassName
}

func persistentVolumeResource(now func() time.Time) *Resource {
	return &Resource{
		GroupVersion: gvCore, Kind: "PersistentVolume", Plural: "persistentvolumes", Singular: "persistentvolume",
		ShortNames:             []string{"pv"},
		Subresources:           []string{"status"},
		New:                    func() Object { return &corev1.PersistentVolume{} },
		NewList:                func() runtime.Object { return &corev1.PersistentVolumeList{} },
		Default:                defaulter(defaultPersistentVolume),
		PrepareForCreate:       defaulter(func(pv *corev1.PersistentVolume) { preparePersistentVolumeCreate(pv, now) }),
		PrepareForUpdate:       preparer(preparePersistentVolumeUpdate),
		PrepareForStatusUpdate: preparer(func(pv, old *corev1.PersistentVolume) { preparePersistentVolumeStatusUpdate(pv, old, now) }),
		ValidateCreate:         createValidator(false, validatePersistentVolume),
		ValidateUpdate:         updateValidator(false, validatePersistentVolumeUpdate),
		ValidateStatusUpdate:   updateValidator(false, validatePersistentVolumeStatusUpdate),
		Fields:                 fieldser(false, func(pv *corev1.PersistentVolume) fields.Set { return fields.Set{"name": pv.Name} }),
		Table:                  persistentVolumeTable(now),
	}
}

func persistentVolumeClaimResource(now func() time.Time) *Resource {
	return &Resource{
		GroupVersion: gvCore, Kind: "PersistentVolumeClaim", Plural: "persistentvolumeclaims", Singular: "persistentvolumeclaim",
		ShortNames: []string{"pvc"}, Namespaced: true,
		Subresources:           []string{"status"},
		New:                    func() Object { return &corev1.PersistentVolumeClaim{} },
		NewList:                func() runtime.Object { return &corev1.PersistentVolumeClaimList{} },
		Default:                defaulter(defaultPersistentVolumeClaim),
		PrepareForCreate:       defaulter(preparePersistentVolumeClaimCreate),
		PrepareForUpdate:       preparer(preparePersistentVolumeClaimUpdate),
		PrepareForStatusUpdate: preparer(preparePersistentVolumeClaimStatusUpdate),
		ValidateCreate:         createValidator(true, validatePersistentVolumeClaim),
		ValidateUpdate:         updateValidator(true, validatePersistentVolumeClaimUpdate),
		ValidateStatusUpdate:   updateValidator(true, validatePersistentVolumeClaimStatusUpdate),
		Fields:                 fieldser(true, func(pvc *corev1.PersistentVolumeClaim) fields.Set { return fields.Set{"name": pvc.Name} }),
		Table:                  persistentVolumeClaimTable(now),
	}
}

// storageResources are the storage.k8s.io/v1 kinds, in discovery order.
func storageResources(now func() time.Time) []*Resource {
	return []*Resource{
		{
			GroupVersion: gvStorage, Kind: "CSIDriver", Plural: "csidrivers", Singular: "csidriver",
			New:              func() Object { return &storagev1.CSIDriver{} },
			NewList:          func() runtime.Object { return &storagev1.CSIDriverList{} },
			Default:          defaulter(defaultCSIDriver),
			PrepareForCreate: defaulter(prepareNothing[*storagev1.CSIDriver]),
			PrepareForUpdate: preparer(prepareKeepGeneration[*storagev1.CSIDriver]),
			ValidateCreate:   createValidator(false, validateCSIDriver),
			ValidateUpdate:   updateValidator(false, validateCSIDriverUpdate),
			Fields:           fieldser[*storagev1.CSIDriver](false, nil),
			Table:            csiDriverTable(now),
		},
		{
			GroupVersion: gvStorage, Kind: "CSINode", Plural: "csinodes", Singular: "csinode",
			New:              func() Object { return &storagev1.CSINode{} },
			NewList:          func() runtime.Object { return &storagev1.CSINodeList{} },
			Default:          defaulter(prepareNothing[*storagev1.CSINode]),
			PrepareForCreate: defaulter(prepareNothing[*storagev1.CSINode]),
			PrepareForUpdate: preparer(prepareKeepGeneration[*storagev1.CSINode]),
			ValidateCreate:   createValidator(false, validateCSINode),
			ValidateUpdate:   updateValidator(false, validateCSINodeUpdate),
			Fields:           fieldser[*storagev1.CSINode](false, nil),
			Table:            csiNodeTable(now),
		},
		{
			GroupVersion: gvStorage, Kind: "StorageClass", Plural: "storageclasses", Singular: "storageclass",
			ShortNames:       []string{"sc"},
			New:              func() Object { return &storagev1.StorageClass{} },
			NewList:          func() runtime.Object { return &storagev1.StorageClassList{} },
			Default:          defaulter(defaultStorageClass),
			PrepareForCreate: defaulter(prepareNothing[*storagev1.StorageClass]),
			PrepareForUpdate: preparer(prepareKeepGeneration[*storagev1.StorageClass]),
			ValidateCreate:   createValidator(false, validateStorageClass),
			ValidateUpdate:   updateValidator(false, validateStorageClassUpdate),
			Fields:           fieldser[*storagev1.StorageClass](false, nil),
			Table:            storageClassTable(now),
		},
		{
			GroupVersion: gvStorage, Kind: "VolumeAttachment", Plural: "volumeattachments", Singular: "volumeattachment",
			Subresources:           []string{"status"},
			New:                    func() Object { return &storagev1.VolumeAttachment{} },
			NewList:                func() runtime.Object { return &storagev1.VolumeAttachmentList{} },
			Default:                defaulter(prepareNothing[*storagev1.VolumeAttachment]),
			PrepareForCreate:       defaulter(func(va *storagev1.VolumeAttachment) { va.Status = storagev1.VolumeAttachmentStatus{} }),
			PrepareForUpdate:       preparer(prepareVolumeAttachmentUpdate),
			PrepareForStatusUpdate: preparer(prepareVolumeAttachmentStatusUpdate),
			ValidateCreate:         createValidator(false, validateVolumeAttachment),
			ValidateUpdate:         updateValidator(false, validateVolumeAttachmentUpdate),
			ValidateStatusUpdate:   updateValidator(false, validateVolumeAttachmentUpdate),
			Fields:                 fieldser[*storagev1.VolumeAttachment](false, nil),
			Table:                  volumeAttachmentTable(now),
		},
	}
}

// Defaults.

// defaultPersistentVolume is SetObjectDefaults_PersistentVolume: phase
// Pending, reclaim policy Retain, volume mode Filesystem, and a hostPath's
// type "".
func defaultPersistentVolume(pv *corev1.PersistentVolume) {
	if pv.Status.Phase == "" {
		pv.Status.Phase = corev1.VolumePending
	}
	if pv.Spec.PersistentVolumeReclaimPolicy == "" {
		pv.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimRetain
	}
	if pv.Spec.VolumeMode == nil {
		m := corev1.PersistentVolumeFilesystem
		pv.Spec.VolumeMode = &m
	}
	if h := pv.Spec.HostPath; h != nil && h.Type == nil {
		t := corev1.HostPathUnset
		h.Type = &t
	}
	roundUpResourceList(pv.Spec.Capacity)
}

// defaultStorageClass is SetDefaults_StorageClass.
func defaultStorageClass(sc *storagev1.StorageClass) {
	if sc.ReclaimPolicy == nil {
		sc.ReclaimPolicy = ptrTo(corev1.PersistentVolumeReclaimDelete)
	}
	if sc.VolumeBindingMode == nil {
		sc.VolumeBindingMode = ptrTo(storagev1.VolumeBindingImmediate)
	}
}

// defaultCSIDriver is SetDefaults_CSIDriver.
func defaultCSIDriver(d *storagev1.CSIDriver) {
	s := &d.Spec
	if s.AttachRequired == nil {
		s.AttachRequired = ptrTo(true)
	}
	if s.PodInfoOnMount == nil {
		s.PodInfoOnMount = ptrTo(false)
	}
	if s.StorageCapacity == nil {
		s.StorageCapacity = ptrTo(false)
	}
	if s.FSGroupPolicy == nil {
		s.FSGroupPolicy = ptrTo(storagev1.ReadWriteOnceWithFSTypeFSGroupPolicy)
	}
	if len(s.VolumeLifecycleModes) == 0 {
		s.VolumeLifecycleModes = []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent}
	}
	if s.RequiresRepublish == nil {
		s.RequiresRepublish = ptrTo(false)
	}
	if s.SELinuxMount == nil {
		s.SELinuxMount = ptrTo(false)
	}
}

// Strategies.

// preparePersistentVolumeCreate resets the status to Pending with the
// time of the transition (PersistentVolumeLastPhaseTransitionTime).
func preparePersistentVolumeCreate(pv *corev1.PersistentVolume, now func() time.Time) {
	t := metav1.NewTime(now())
	pv.Status = corev1.PersistentVolumeStatus{Phase: corev1.VolumePending, LastPhaseTransitionTime: &t}
}

func preparePersistentVolumeUpdate(pv, old *corev1.PersistentVolume) {
	keepGeneration(pv, old)
	pv.Status = old.Status
}

// preparePersistentVolumeStatusUpdate keeps the spec, and stamps the
// phase's transition time when the phase changed and the client did not
// set a new time; an unchanged phase keeps the old time.
func preparePersistentVolumeStatusUpdate(pv, old *corev1.PersistentVolume, now func() time.Time) {
	keepGeneration(pv, old)
	pv.Spec = old.Spec
	switch {
	case pv.Status.Phase == old.Status.Phase && pv.Status.LastPhaseTransitionTime == nil:
		pv.Status.LastPhaseTransitionTime = old.Status.LastPhaseTransitionTime
	case pv.Status.Phase != old.Status.Phase &&
		(pv.Status.LastPhaseTransitionTime == nil || pv.Status.LastPhaseTransitionTime.Equal(old.Status.LastPhaseTransitionTime)):
		t := metav1.NewTime(now())
		pv.Status.LastPhaseTransitionTime = &t
	}
}

func preparePersistentVolumeClaimCreate(pvc *corev1.PersistentVolumeClaim) {
	pvc.Status = corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending}
	normalizeDataSources(&pvc.Spec)
}

func preparePersistentVolumeClaimUpdate(pvc, old *corev1.PersistentVolumeClaim) {
	keepGeneration(pvc, old)
	pvc.Status = old.Status
	normalizeDataSources(&pvc.Spec)
}

func preparePersistentVolumeClaimStatusUpdate(pvc, old *corev1.PersistentVolumeClaim) {
	keepGeneration(pvc, old)
	pvc.Spec = old.Spec
}

// normalizeDataSources is pvcutil.NormalizeDataSources: dataSource and
// dataSourceRef name the same thing, so one set fills the other (a
// cross-namespace dataSourceRef has no dataSource).
func normalizeDataSources(s *corev1.PersistentVolumeClaimSpec) {
	switch {
	case s.DataSource != nil && s.DataSourceRef == nil:
		s.DataSourceRef = &corev1.TypedObjectReference{APIGroup: s.DataSource.APIGroup, Kind: s.DataSource.Kind, Name: s.DataSource.Name}
	case s.DataSourceRef != nil && s.DataSource == nil:
		if ns := s.DataSourceRef.Namespace; ns == nil || *ns == "" {
			s.DataSource = &corev1.TypedLocalObjectReference{APIGroup: s.DataSourceRef.APIGroup, Kind: s.DataSourceRef.Kind, Name: s.DataSourceRef.Name}
		}
	}
}

func prepareVolumeAttachmentUpdate(va, old *storagev1.VolumeAttachment) {
	keepGeneration(va, old)
	va.Status = old.Status
}

// prepareVolumeAttachmentStatusUpdate keeps the spec and, as
// metav1.ResetObjectMetaForStatus, the metadata a status write may not
// change.
func prepareVolumeAttachmentStatusUpdate(va, old *storagev1.VolumeAttachment) {
	keepGeneration(va, old)
	va.Spec = old.Spec
	va.DeletionTimestamp = old.DeletionTimestamp
	va.Labels = old.Labels
	va.Annotations = old.Annotations
	va.Finalizers = old.Finalizers
	va.OwnerReferences = old.OwnerReferences
	va.ManagedFields = old.ManagedFields
}

// EphemeralClaimName is the name of the claim of a pod's generic
// ephemeral volume: POD-VOLUME (component-helpers' ephemeral.VolumeClaimName).
func EphemeralClaimName(pod *corev1.Pod, v *corev1.Volume) string { return pod.Name + "-" + v.Name }
