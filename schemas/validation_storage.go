package schemas

import (
	"fmt"
	"math"
	"path"
	"reflect"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// This file ports the storage part of kube's pkg/apis/core/validation
// (ValidatePersistentVolume, ValidatePersistentVolumeClaim and their
// updates) and pkg/apis/storage/validation, with kube's field paths, error
// types and messages, as a cluster with the VolumeAttributesClass and
// RecoverVolumeExpansionFailure features (GA) validates them. Of the
// in-tree volume plugins, hostPath, local, nfs and csi are validated in
// full; the others are counted for "exactly one volume type" only.

var supportedReclaimPolicies = []string{string(corev1.PersistentVolumeReclaimDelete),
	string(corev1.PersistentVolumeReclaimRecycle), string(corev1.PersistentVolumeReclaimRetain)}

const notPositiveMsg = "must be greater than zero"

func validatePersistentVolume(pv *corev1.PersistentVolume) field.ErrorList {
	errs := validateObjectMeta(&pv.ObjectMeta, false, apivalidation.NameIsDNSSubdomain, metaPath)
	return append(errs, validatePersistentVolumeSpec(&pv.Spec, false, field.NewPath("spec"))...)
}

// validateAccessModes checks the modes of a volume or claim (required
// says with which detail an empty list is refused).
func validateAccessModes(modes []corev1.PersistentVolumeAccessMode, required string, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(modes) == 0 {
		errs = append(errs, field.Required(fldPath, required))
	}
	var rwop, other bool
	for _, m := range modes {
		switch {
		case !sets.New(claimAccessModes...).Has(string(m)):
			errs = append(errs, field.NotSupported(fldPath, m, claimAccessModes))
		case m == corev1.ReadWriteOncePod:
			rwop = true
		default:
			other = true
		}
	}
	if rwop && other {
		errs = append(errs, field.Forbidden(fldPath, "may not use ReadWriteOncePod with other access modes"))
	}
	return errs
}

// validatePersistentVolumeSpec is ValidatePersistentVolumeSpec; inline is
// a VolumeAttachment's inlineVolumeSpec.
func validatePersistentVolumeSpec(s *corev1.PersistentVolumeSpec, inline bool, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if inline {
		if s.ClaimRef != nil {
			errs = append(errs, field.Forbidden(fldPath.Child("claimRef"), "may not be specified in the context of inline volumes"))
		}
		if len(s.Capacity) != 0 {
			errs = append(errs, field.Forbidden(fldPath.Child("capacity"), "may not be specified in the context of inline volumes"))
		}
		if s.CSI == nil {
			errs = append(errs, field.Required(fldPath.Child("csi"), "has to be specified in the context of inline volumes"))
		}
	}
	errs = append(errs, validateAccessModes(s.AccessModes, "", fldPath.Child("accessModes"))...)
	if !inline {
		capPath := fldPath.Child("capacity")
		if len(s.Capacity) == 0 {
			errs = append(errs, field.Required(capPath, ""))
		}
		if _, ok := s.Capacity[corev1.ResourceStorage]; !ok || len(s.Capacity) > 1 {
			errs = append(errs, field.NotSupported(capPath, s.Capacity, []corev1.ResourceName{corev1.ResourceStorage}))
		}
		for _, r := range sortedKeys(resourceNames(s.Capacity)) {
			q := s.Capacity[corev1.ResourceName(r)]
			errs = append(errs, validateBasicResource(q, capPath.Key(r))...)
			errs = append(errs, validatePositiveQuantity(q, capPath.Key(r))...)
		}
	}
	if p := s.PersistentVolumeReclaimPolicy; p != "" {
		switch {
		case inline && p != corev1.PersistentVolumeReclaimRetain:
			errs = append(errs, field.Forbidden(fldPath.Child("persistentVolumeReclaimPolicy"), "may only be Retain in the context of inline volumes"))
		case !inline && !sets.New(supportedReclaimPolicies...).Has(string(p)):
			errs = append(errs, field.NotSupported(fldPath.Child("persistentVolumeReclaimPolicy"), p, supportedReclaimPolicies))
		}
	}
	affinity := false
	if s.NodeAffinity != nil {
		if inline {
			errs = append(errs, field.Forbidden(fldPath.Child("nodeAffinity"), "may not be specified in the context of inline volumes"))
		} else {
			affinity = true
			errs = append(errs, validateVolumeNodeAffinity(s.NodeAffinity, fldPath.Child("nodeAffinity"))...)
		}
	}
	errs = append(errs, validatePersistentVolumeSource(&s.PersistentVolumeSource, affinity, fldPath)...)
	if s.HostPath != nil && path.Clean(s.HostPath.Path) == "/" && s.PersistentVolumeReclaimPolicy == corev1.PersistentVolumeReclaimRecycle {
		errs = append(errs, field.Forbidden(fldPath.Child("persistentVolumeReclaimPolicy"), "may not be 'recycle' for a hostPath mount of '/'"))
	}
	if s.StorageClassName != "" {
		if inline {
			errs = append(errs, field.Forbidden(fldPath.Child("storageClassName"), "may not be specified in the context of inline volumes"))
		} else {
			errs = append(errs, validateNameWith(apivalidation.NameIsDNSSubdomain, s.StorageClassName, fldPath.Child("storageClassName"))...)
		}
	}
	if m := s.VolumeMode; m != nil {
		switch {
		case inline && *m != corev1.PersistentVolumeFilesystem:
			errs = append(errs, field.Forbidden(fldPath.Child("volumeMode"), "may not specify volumeMode other than Filesystem in the context of inline volumes"))
		case !inline && !sets.New(claimVolumeModes...).Has(string(*m)):
			errs = append(errs, field.NotSupported(fldPath.Child("volumeMode"), *m, claimVolumeModes))
		}
	}
	if c := s.VolumeAttributesClassName; c != nil {
		if *c == "" {
			errs = append(errs, field.Required(fldPath.Child("volumeAttributesClassName"), "an empty string is disallowed"))
		} else {
			errs = append(errs, validateNameWith(apivalidation.NameIsDNSSubdomain, *c, fldPath.Child("volumeAttributesClassName"))...)
		}
		if s.CSI == nil {
			errs = append(errs, field.Required(fldPath.Child("csi"), "has to be specified when using volumeAttributesClassName"))
		}
	}
	return errs
}

// validatePersistentVolumeSource checks that exactly one source is set, in
// kube's order, and validates hostPath, local, nfs and csi.
func validatePersistentVolumeSource(src *corev1.PersistentVolumeSource, affinity bool, fldPath *field.Path) field.ErrorList {
	o := &oneOf{path: fldPath, what: "volume type"}
	one := o.add
	one(src.HostPath != nil, "hostPath", func(p *field.Path) field.ErrorList { return validateHostPath(src.HostPath, p) })
	one(src.GCEPersistentDisk != nil, "gcePersistentDisk", nil)
	one(src.AWSElasticBlockStore != nil, "awsElasticBlockStore", nil)
	one(src.Glusterfs != nil, "glusterfs", nil)
	one(src.Flocker != nil, "flocker", nil)
	one(src.NFS != nil, "nfs", func(p *field.Path) field.ErrorList { return validateNFS(src.NFS, p) })
	one(src.RBD != nil, "rbd", nil)
	one(src.Quobyte != nil, "quobyte", nil)
	one(src.CephFS != nil, "cephFS", nil)
	one(src.ISCSI != nil, "iscsi", nil)
	one(src.Cinder != nil, "cinder", nil)
	one(src.FC != nil, "fc", nil)
	if src.FlexVolume != nil {
		// kube counts flexVolume without the more-than-one check.
		o.n++
	}
	one(src.AzureFile != nil, "azureFile", nil)
	one(src.VsphereVolume != nil, "vsphereVolume", nil)
	one(src.PhotonPersistentDisk != nil, "photonPersistentDisk", nil)
	one(src.PortworxVolume != nil, "portworxVolume", nil)
	one(src.AzureDisk != nil, "azureDisk", nil)
	one(src.ScaleIO != nil, "scaleIO", nil)
	one(src.Local != nil, "local", func(p *field.Path) field.ErrorList {
		var e field.ErrorList
		if src.Local.Path == "" {
			e = append(e, field.Required(p.Child("path"), ""))
		} else {
			e = append(e, validatePathNoBacksteps(src.Local.Path, p.Child("path"))...)
		}
		if !affinity {
			e = append(e, field.Required(fldPath.Child("nodeAffinity"), "Local volume requires node affinity"))
		}
		return e
	})
	one(src.StorageOS != nil, "storageos", nil)
	one(src.CSI != nil, "csi", func(p *field.Path) field.ErrorList { return validateCSIPersistentVolumeSource(src.CSI, p) })
	return o.result()
}

func validateNFS(nfs *corev1.NFSVolumeSource, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if nfs.Server == "" {
		errs = append(errs, field.Required(fldPath.Child("server"), ""))
	}
	if nfs.Path == "" {
		errs = append(errs, field.Required(fldPath.Child("path"), ""))
	}
	if !path.IsAbs(nfs.Path) {
		errs = append(errs, field.Invalid(fldPath.Child("path"), nfs.Path, "must be an absolute path"))
	}
	return errs
}

// validateCSIDriverName is core's ValidateCSIDriverName.
func validateCSIDriverName(name string, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if name == "" {
		errs = append(errs, field.Required(fldPath, ""))
	}
	if len(name) > 63 {
		errs = append(errs, field.TooLong(fldPath, name, 63))
	}
	for _, msg := range validation.IsDNS1123Subdomain(strings.ToLower(name)) {
		errs = append(errs, field.Invalid(fldPath, name, msg))
	}
	return errs
}

func validateCSIPersistentVolumeSource(csi *corev1.CSIPersistentVolumeSource, fldPath *field.Path) field.ErrorList {
	errs := validateCSIDriverName(csi.Driver, fldPath.Child("driver"))
	if csi.VolumeHandle == "" {
		errs = append(errs, field.Required(fldPath.Child("volumeHandle"), ""))
	}
	for _, ref := range []struct {
		name string
		ref  *corev1.SecretReference
	}{
		{"controllerPublishSecretRef", csi.ControllerPublishSecretRef},
		{"controllerExpandSecretRef", csi.ControllerExpandSecretRef},
		{"nodePublishSecretRef", csi.NodePublishSecretRef},
		{"nodeExpandSecretRef", csi.NodeExpandSecretRef},
	} {
		if ref.ref != nil {
			errs = append(errs, validatePVSecretReference(ref.ref, fldPath.Child(ref.name))...)
		}
	}
	return errs
}

func validatePVSecretReference(ref *corev1.SecretReference, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if ref.Name == "" {
		errs = append(errs, field.Required(fldPath.Child("name"), ""))
	} else {
		errs = append(errs, validateNameWith(apivalidation.NameIsDNSSubdomain, ref.Name, fldPath.Child("name"))...)
	}
	if ref.Namespace == "" {
		errs = append(errs, field.Required(fldPath.Child("namespace"), ""))
	} else {
		errs = append(errs, validateDNS1123Label(ref.Namespace, fldPath.Child("namespace"))...)
	}
	return errs
}

func validateVolumeNodeAffinity(a *corev1.VolumeNodeAffinity, fldPath *field.Path) field.ErrorList {
	if a.Required == nil {
		return field.ErrorList{field.Required(fldPath.Child("required"), "must specify required node constraints")}
	}
	return validateNodeSelector(a.Required, fldPath.Child("required"))
}

// validateNodeSelector is ValidateNodeSelector (label values validated).
func validateNodeSelector(ns *corev1.NodeSelector, fldPath *field.Path) field.ErrorList {
	termsPath := fldPath.Child("nodeSelectorTerms")
	if len(ns.NodeSelectorTerms) == 0 {
		return field.ErrorList{field.Required(termsPath, "must have at least one node selector term")}
	}
	var errs field.ErrorList
	for i, term := range ns.NodeSelectorTerms {
		for j, rq := range term.MatchExpressions {
			errs = append(errs, validateNodeSelectorRequirement(rq, termsPath.Index(i).Child("matchExpressions").Index(j))...)
		}
		for j, rq := range term.MatchFields {
			errs = append(errs, validateNodeFieldSelectorRequirement(rq, termsPath.Index(i).Child("matchFields").Index(j))...)
		}
	}
	return errs
}

func validateNodeSelectorRequirement(rq corev1.NodeSelectorRequirement, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch rq.Operator {
	case corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn:
		if len(rq.Values) == 0 {
			errs = append(errs, field.Required(fldPath.Child("values"), "must be specified when `operator` is 'In' or 'NotIn'"))
		}
	case corev1.NodeSelectorOpExists, corev1.NodeSelectorOpDoesNotExist:
		if len(rq.Values) > 0 {
			errs = append(errs, field.Forbidden(fldPath.Child("values"), "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"))
		}
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt:
		if len(rq.Values) != 1 {
			errs = append(errs, field.Required(fldPath.Child("values"), "must be specified single value when `operator` is 'Lt' or 'Gt'"))
		}
	default:
		errs = append(errs, field.Invalid(fldPath.Child("operator"), rq.Operator, "not a valid selector operator"))
	}
	errs = append(errs, metav1validation.ValidateLabelName(rq.Key, fldPath.Child("key"))...)
	for i, v := range rq.Values {
		for _, msg := range validation.IsValidLabelValue(v) {
			errs = append(errs, field.Invalid(fldPath.Child("values").Index(i), v, msg))
		}
	}
	return errs
}

func validateNodeFieldSelectorRequirement(rq corev1.NodeSelectorRequirement, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch rq.Operator {
	case corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn:
		if len(rq.Values) != 1 {
			errs = append(errs, field.Required(fldPath.Child("values"), "must be only one value when `operator` is 'In' or 'NotIn' for node field selector"))
		}
	default:
		errs = append(errs, field.Invalid(fldPath.Child("operator"), rq.Operator, "not a valid selector operator"))
	}
	if rq.Key != "metadata.name" {
		return append(errs, field.Invalid(fldPath.Child("key"), rq.Key, "not a valid field selector key"))
	}
	for i, v := range rq.Values {
		errs = append(errs, validateNameWith(apivalidation.NameIsDNSSubdomain, v, fldPath.Child("values").Index(i))...)
	}
	return errs
}

func validateBasicResource(q resource.Quantity, fldPath *field.Path) field.ErrorList {
	if q.Value() < 0 {
		return field.ErrorList{field.Invalid(fldPath, q.String(), "must be a valid resource quantity")}
	}
	return nil
}

func validatePositiveQuantity(q resource.Quantity, fldPath *field.Path) field.ErrorList {
	if q.Cmp(resource.Quantity{}) <= 0 {
		return field.ErrorList{field.Invalid(fldPath, q.String(), notPositiveMsg)}
	}
	return nil
}

// validatePersistentVolumeUpdate is ValidatePersistentVolumeUpdate: the
// source is immutable (a CSI controllerExpandSecretRef may be added), so
// are the volume mode and a node affinity once set, and a
// volumeAttributesClassName may not go back to unset.
func validatePersistentVolumeUpdate(pv, old *corev1.PersistentVolume) field.ErrorList {
	errs := validatePersistentVolume(pv)
	src := pv.Spec.PersistentVolumeSource
	if old.Spec.CSI != nil && old.Spec.CSI.ControllerExpandSecretRef == nil && src.CSI != nil && src.CSI.ControllerExpandSecretRef != nil {
		csi := *src.CSI
		csi.ControllerExpandSecretRef = nil
		src.CSI = &csi
	}
	if !apiequality.Semantic.DeepEqual(src, old.Spec.PersistentVolumeSource) {
		errs = append(errs, field.Forbidden(field.NewPath("spec", "persistentvolumesource"),
			"spec.persistentvolumesource is immutable after creation\n"+specDiff(old.Spec.PersistentVolumeSource, src)))
	}
	errs = append(errs, apivalidation.ValidateImmutableField(pv.Spec.VolumeMode, old.Spec.VolumeMode, field.NewPath("volumeMode"))...)
	if old.Spec.NodeAffinity != nil {
		errs = append(errs, apivalidation.ValidateImmutableField(pv.Spec.NodeAffinity, old.Spec.NodeAffinity, field.NewPath("nodeAffinity"))...)
	}
	if old.Spec.VolumeAttributesClassName != nil && pv.Spec.VolumeAttributesClassName == nil {
		errs = append(errs, field.Forbidden(field.NewPath("spec", "volumeAttributesClassName"), "update from non-nil value to nil is forbidden"))
	}
	return errs
}

// validatePersistentVolumeStatusUpdate is ValidatePersistentVolumeStatusUpdate.
func validatePersistentVolumeStatusUpdate(pv, _ *corev1.PersistentVolume) field.ErrorList {
	if pv.ResourceVersion == "" {
		return field.ErrorList{field.Required(field.NewPath("resourceVersion"), "")}
	}
	return nil
}

func validatePersistentVolumeClaim(pvc *corev1.PersistentVolumeClaim) field.ErrorList {
	errs := validateObjectMeta(&pvc.ObjectMeta, true, apivalidation.NameIsDNSSubdomain, metaPath)
	return append(errs, validatePersistentVolumeClaimSpec(&pvc.Spec, field.NewPath("spec"))...)
}

// validatePersistentVolumeClaimSpec is ValidatePersistentVolumeClaimSpec.
func validatePersistentVolumeClaimSpec(s *corev1.PersistentVolumeClaimSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	modesPath := fldPath.Child("accessModes")
	if len(s.AccessModes) == 0 {
		errs = append(errs, field.Required(modesPath, "at least 1 access mode is required"))
	}
	if s.Selector != nil {
		errs = append(errs, metav1validation.ValidateLabelSelector(s.Selector, metav1validation.LabelSelectorValidationOptions{}, fldPath.Child("selector"))...)
	}
	if len(s.AccessModes) > 0 {
		errs = append(errs, validateAccessModes(s.AccessModes, "", modesPath)...)
	}
	storagePath := fldPath.Child("resources").Key(string(corev1.ResourceStorage))
	if q, ok := s.Resources.Requests[corev1.ResourceStorage]; !ok {
		errs = append(errs, field.Required(storagePath, ""))
	} else if e := validatePositiveQuantity(q, storagePath); len(e) > 0 {
		errs = append(errs, e...)
	} else {
		errs = append(errs, validateQuantityValue(string(corev1.ResourceStorage), q, storagePath)...)
	}
	if c := s.StorageClassName; c != nil && *c != "" {
		errs = append(errs, validateNameWith(apivalidation.NameIsDNSSubdomain, *c, fldPath.Child("storageClassName"))...)
	}
	if m := s.VolumeMode; m != nil && !sets.New(claimVolumeModes...).Has(string(*m)) {
		errs = append(errs, field.NotSupported(fldPath.Child("volumeMode"), *m, claimVolumeModes))
	}
	if s.DataSource != nil {
		ref := corev1.TypedObjectReference{APIGroup: s.DataSource.APIGroup, Kind: s.DataSource.Kind, Name: s.DataSource.Name}
		errs = append(errs, validateDataSource(&ref, fldPath.Child("dataSource"))...)
	}
	if s.DataSourceRef != nil {
		errs = append(errs, validateDataSource(s.DataSourceRef, fldPath.Child("dataSourceRef"))...)
	}
	if r := s.DataSourceRef; r != nil && r.Namespace != nil && *r.Namespace != "" {
		if s.DataSource != nil {
			errs = append(errs, field.Invalid(fldPath, fldPath.Child("dataSource"), "may not be specified when dataSourceRef.namespace is specified"))
		}
	} else if s.DataSource != nil && s.DataSourceRef != nil {
		if !reflect.DeepEqual(s.DataSource.APIGroup, r.APIGroup) || s.DataSource.Kind != r.Kind || s.DataSource.Name != r.Name {
			errs = append(errs, field.Invalid(fldPath, fldPath.Child("dataSource"), "must match dataSourceRef"))
		}
	}
	if c := s.VolumeAttributesClassName; c != nil && *c != "" {
		errs = append(errs, validateNameWith(apivalidation.NameIsDNSSubdomain, *c, fldPath.Child("volumeAttributesClassName"))...)
	}
	return errs
}

// validateDataSource is validateDataSource and validateDataSourceRef (a
// dataSource has no namespace).
func validateDataSource(ref *corev1.TypedObjectReference, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if ref.Name == "" {
		errs = append(errs, field.Required(fldPath.Child("name"), ""))
	}
	if ref.Kind == "" {
		errs = append(errs, field.Required(fldPath.Child("kind"), ""))
	}
	group := ""
	if ref.APIGroup != nil {
		group = *ref.APIGroup
	}
	if group == "" && ref.Kind != "PersistentVolumeClaim" {
		errs = append(errs, field.Invalid(fldPath, ref.Kind, "must be 'PersistentVolumeClaim' when referencing the default apiGroup"))
	}
	if group != "" {
		for _, msg := range validation.IsDNS1123Subdomain(group) {
			errs = append(errs, field.Invalid(fldPath.Child("apiGroup"), group, msg))
		}
	}
	if ref.Namespace != nil && *ref.Namespace != "" {
		errs = append(errs, validateNameWith(apivalidation.ValidateNamespaceName, *ref.Namespace, fldPath.Child("namespace"))...)
	}
	return errs
}

// validatePersistentVolumeClaimUpdate is ValidatePersistentVolumeClaimUpdate:
// the spec is immutable but for a volumeName set once, a class set on a
// claim that had none (or only the beta annotation naming it), the storage
// request of a bound claim, and volumeAttributesClassName. The request may
// shrink only back to above status.capacity (recovery from a failed
// expansion).
func validatePersistentVolumeClaimUpdate(pvc, old *corev1.PersistentVolumeClaim) field.ErrorList {
	errs := validatePersistentVolumeClaim(pvc)
	cur, prev := pvc.DeepCopy(), old.DeepCopy()
	if old.Spec.VolumeName == "" {
		prev.Spec.VolumeName = cur.Spec.VolumeName
	}
	oldAnn, oldHasAnn := old.Annotations[corev1.BetaStorageClassAnnotation]
	newAnn, newHasAnn := pvc.Annotations[corev1.BetaStorageClassAnnotation]
	newClass := pvc.Spec.StorageClassName
	if oldHasAnn && old.Spec.StorageClassName == nil && newClass != nil && *newClass == oldAnn && (!newHasAnn || newAnn == oldAnn) {
		// The upgrade from the beta annotation to the field.
		cur.Spec.StorageClassName = nil
	} else {
		if newAnn != oldAnn {
			errs = append(errs, field.Forbidden(metaPath.Child("annotations").Key(corev1.BetaStorageClassAnnotation), "field is immutable"))
		}
		if newClass != nil && old.Spec.StorageClassName == nil && (!oldHasAnn || *newClass == oldAnn) {
			cur.Spec.StorageClassName = prev.Spec.StorageClassName
		}
	}
	if pvc.Status.Phase == corev1.ClaimBound && cur.Spec.Resources.Requests != nil {
		cur.Spec.Resources.Requests[corev1.ResourceStorage] = old.Spec.Resources.Requests[corev1.ResourceStorage]
	}
	cur.Spec.VolumeAttributesClassName = prev.Spec.VolumeAttributesClassName
	if !apiequality.Semantic.DeepEqual(cur.Spec, prev.Spec) {
		errs = append(errs, field.Forbidden(field.NewPath("spec"),
			"spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims\n"+specDiff(prev.Spec, cur.Spec)))
	}
	oldSize := old.Spec.Resources.Requests[corev1.ResourceStorage]
	newSize := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	statusSize := old.Status.Capacity[corev1.ResourceStorage]
	if newSize.Cmp(oldSize) < 0 && newSize.Cmp(statusSize) <= 0 {
		errs = append(errs, field.Forbidden(field.NewPath("spec", "resources", "requests", "storage"), "field can not be less than status.capacity"))
	}
	errs = append(errs, apivalidation.ValidateImmutableField(pvc.Spec.VolumeMode, old.Spec.VolumeMode, field.NewPath("volumeMode"))...)
	if old.Spec.VolumeAttributesClassName != nil && !apiequality.Semantic.DeepEqual(old.Spec.VolumeAttributesClassName, pvc.Spec.VolumeAttributesClassName) {
		vacPath := field.NewPath("spec", "volumeAttributesClassName")
		switch {
		case pvc.Spec.VolumeAttributesClassName == nil:
			errs = append(errs, field.Forbidden(vacPath, "update from non-nil value to nil is forbidden"))
		case *pvc.Spec.VolumeAttributesClassName == "":
			errs = append(errs, field.Forbidden(vacPath, "update from non-nil value to an empty string is forbidden"))
		}
	}
	return errs
}

var claimResizeStatuses = []string{
	string(corev1.PersistentVolumeClaimControllerResizeInProgress), string(corev1.PersistentVolumeClaimControllerResizeInfeasible),
	string(corev1.PersistentVolumeClaimNodeResizeInProgress), string(corev1.PersistentVolumeClaimNodeResizeInfeasible),
	string(corev1.PersistentVolumeClaimNodeResizePending),
}

// validatePersistentVolumeClaimStatusUpdate is
// ValidatePersistentVolumeClaimStatusUpdate.
func validatePersistentVolumeClaimStatusUpdate(pvc, _ *corev1.PersistentVolumeClaim) field.ErrorList {
	var errs field.ErrorList
	if pvc.ResourceVersion == "" {
		errs = append(errs, field.Required(field.NewPath("resourceVersion"), ""))
	}
	if len(pvc.Spec.AccessModes) == 0 {
		errs = append(errs, field.Required(field.NewPath("Spec", "accessModes"), ""))
	}
	capPath := field.NewPath("status", "capacity")
	for _, r := range sortedKeys(resourceNames(pvc.Status.Capacity)) {
		errs = append(errs, validateBasicResource(pvc.Status.Capacity[corev1.ResourceName(r)], capPath.Key(r))...)
	}
	statusPath := field.NewPath("status", "allocatedResourceStatus")
	for k, v := range pvc.Status.AllocatedResourceStatuses {
		errs = append(errs, validateClaimResourceKey(string(k), statusPath)...)
		if !sets.New(claimResizeStatuses...).Has(string(v)) {
			errs = append(errs, field.NotSupported(statusPath, k, claimResizeStatuses))
		}
	}
	allocPath := field.NewPath("status", "allocatedResources")
	for _, r := range sortedKeys(resourceNames(pvc.Status.AllocatedResources)) {
		if e := validateClaimResourceKey(r, allocPath); len(e) > 0 {
			errs = append(errs, e...)
			continue
		}
		q := pvc.Status.AllocatedResources[corev1.ResourceName(r)]
		if e := validateBasicResource(q, allocPath.Key(r)); len(e) > 0 {
			errs = append(errs, e...)
		} else {
			errs = append(errs, validateQuantityValue(r, q, allocPath.Key(r))...)
		}
	}
	return errs
}

// validateClaimResourceKey is validatePersistentVolumeClaimResourceKey:
// a qualified name, and of the native names only storage.
func validateClaimResourceKey(key string, fldPath *field.Path) field.ErrorList {
	if errs := validateQualifiedName(key, fldPath); len(errs) > 0 {
		return errs
	}
	native := !strings.Contains(key, "/") || strings.Contains(strings.SplitN(key, "/", 2)[0], "kubernetes.io")
	if native && key != string(corev1.ResourceStorage) {
		return field.ErrorList{field.NotSupported(fldPath, key, []string{string(corev1.ResourceStorage)})}
	}
	return nil
}

// storage.k8s.io.

const (
	maxProvisionerParameterSize = 256 * (1 << 10)
	maxProvisionerParameterLen  = 512
	maxAttachedVolumeMetadata   = 256 * (1 << 10)
	maxVolumeErrorMessageSize   = 1024
	csiNodeIDMaxLength          = 256 // AllowLongNodeID, as the csinode strategy sets it
)

var (
	classReclaimPolicies = []string{string(corev1.PersistentVolumeReclaimDelete), string(corev1.PersistentVolumeReclaimRetain)}
	volumeBindingModes   = []string{string(storagev1.VolumeBindingImmediate), string(storagev1.VolumeBindingWaitForFirstConsumer)}
	fsGroupPolicies      = []string{string(storagev1.FileFSGroupPolicy), string(storagev1.NoneFSGroupPolicy), string(storagev1.ReadWriteOnceWithFSTypeFSGroupPolicy)}
	lifecycleModes       = []string{string(storagev1.VolumeLifecyclePersistent), string(storagev1.VolumeLifecycleEphemeral)}
)

// validateStorageClass is ValidateStorageClass.
func validateStorageClass(sc *storagev1.StorageClass) field.ErrorList {
	errs := validateObjectMeta(&sc.ObjectMeta, false, apivalidation.NameIsDNSSubdomain, metaPath)
	errs = append(errs, validateProvisioner(sc.Provisioner, field.NewPath("provisioner"))...)
	errs = append(errs, validateProvisionerParameters(sc.Parameters, field.NewPath("parameters"))...)
	if p := sc.ReclaimPolicy; p != nil && *p != "" && !sets.New(classReclaimPolicies...).Has(string(*p)) {
		errs = append(errs, field.NotSupported(field.NewPath("reclaimPolicy"), *p, classReclaimPolicies))
	}
	switch m := sc.VolumeBindingMode; {
	case m == nil:
		errs = append(errs, field.Required(field.NewPath("volumeBindingMode"), ""))
	case !sets.New(volumeBindingModes...).Has(string(*m)):
		errs = append(errs, field.NotSupported(field.NewPath("volumeBindingMode"), *m, volumeBindingModes))
	}
	return append(errs, validateAllowedTopologies(sc.AllowedTopologies, field.NewPath("allowedTopologies"))...)
}

// validateStorageClassUpdate is ValidateStorageClassUpdate: parameters,
// provisioner, reclaim policy and binding mode are immutable.
func validateStorageClassUpdate(sc, old *storagev1.StorageClass) field.ErrorList {
	var errs field.ErrorList
	if !reflect.DeepEqual(old.Parameters, sc.Parameters) {
		errs = append(errs, field.Forbidden(field.NewPath("parameters"), "updates to parameters are forbidden."))
	}
	if sc.Provisioner != old.Provisioner {
		errs = append(errs, field.Forbidden(field.NewPath("provisioner"), "updates to provisioner are forbidden."))
	}
	if !apiequality.Semantic.DeepEqual(sc.ReclaimPolicy, old.ReclaimPolicy) {
		errs = append(errs, field.Forbidden(field.NewPath("reclaimPolicy"), "updates to reclaimPolicy are forbidden."))
	}
	return append(errs, apivalidation.ValidateImmutableField(sc.VolumeBindingMode, old.VolumeBindingMode, field.NewPath("volumeBindingMode"))...)
}

func validateProvisioner(p string, fldPath *field.Path) field.ErrorList {
	if p == "" {
		return field.ErrorList{field.Required(fldPath, p)}
	}
	return validateQualifiedName(strings.ToLower(p), fldPath)
}

func validateProvisionerParameters(params map[string]string, fldPath *field.Path) field.ErrorList {
	if len(params) > maxProvisionerParameterLen {
		return field.ErrorList{field.TooLong(fldPath, "", maxProvisionerParameterLen)}
	}
	var errs field.ErrorList
	size := 0
	for k, v := range params {
		if k == "" {
			errs = append(errs, field.Invalid(fldPath, k, "field can not be empty."))
		}
		size += len(k) + len(v)
	}
	if size > maxProvisionerParameterSize {
		errs = append(errs, field.TooLong(fldPath, "", maxProvisionerParameterSize))
	}
	return errs
}

// validateAllowedTopologies is validateAllowedTopologies with
// ValidateTopologySelectorTerm.
func validateAllowedTopologies(terms []corev1.TopologySelectorTerm, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	var seen []map[string]sets.Set[string]
	for i, term := range terms {
		idx := fldPath.Index(i)
		exprs := map[string]sets.Set[string]{}
		for j, rq := range term.MatchLabelExpressions {
			p := idx.Child("matchLabelExpressions").Index(j)
			values := sets.New[string]()
			if len(rq.Values) == 0 {
				errs = append(errs, field.Required(p.Child("values"), ""))
			}
			for k, v := range rq.Values {
				if values.Has(v) {
					errs = append(errs, field.Duplicate(p.Child("values").Index(k), v))
				}
				values.Insert(v)
			}
			errs = append(errs, metav1validation.ValidateLabelName(rq.Key, p.Child("key"))...)
			if _, dup := exprs[rq.Key]; dup {
				errs = append(errs, field.Duplicate(p.Child("key"), rq.Key))
			}
			exprs[rq.Key] = values
		}
		for _, t := range seen {
			if apiequality.Semantic.DeepEqual(exprs, t) {
				errs = append(errs, field.Duplicate(idx.Child("matchLabelExpressions"), ""))
			}
		}
		seen = append(seen, exprs)
	}
	return errs
}

// validateVolumeAttachment is ValidateVolumeAttachment and
// ValidateVolumeAttachmentV1.
func validateVolumeAttachment(va *storagev1.VolumeAttachment) field.ErrorList {
	errs := validateObjectMeta(&va.ObjectMeta, false, apivalidation.NameIsDNSSubdomain, metaPath)
	spec := field.NewPath("spec")
	if va.Spec.Attacher == "" {
		errs = append(errs, field.Required(spec.Child("attacher"), ""))
	}
	src := va.Spec.Source
	srcPath := spec.Child("source")
	switch {
	case src.InlineVolumeSpec == nil && src.PersistentVolumeName == nil:
		errs = append(errs, field.Required(srcPath, "must specify exactly one of inlineVolumeSpec and persistentVolumeName"))
	case src.InlineVolumeSpec != nil && src.PersistentVolumeName != nil:
		errs = append(errs, field.Forbidden(srcPath, "must specify exactly one of inlineVolumeSpec and persistentVolumeName"))
	case src.PersistentVolumeName != nil:
		if *src.PersistentVolumeName == "" {
			errs = append(errs, field.Required(srcPath.Child("persistentVolumeName"), "must specify non empty persistentVolumeName"))
		}
	default:
		errs = append(errs, validatePersistentVolumeSpec(src.InlineVolumeSpec, true, srcPath.Child("inlineVolumeSpec"))...)
	}
	errs = append(errs, validateNameWith(apivalidation.NameIsDNSSubdomain, va.Spec.NodeName, spec.Child("nodeName"))...)
	status := field.NewPath("status")
	size := 0
	for k, v := range va.Status.AttachmentMetadata {
		size += len(k) + len(v)
	}
	if size > maxAttachedVolumeMetadata {
		errs = append(errs, field.TooLong(status.Child("attachmentMetadata"), "", maxAttachedVolumeMetadata))
	}
	errs = append(errs, validateVolumeError(va.Status.AttachError, status.Child("attachError"))...)
	errs = append(errs, validateVolumeError(va.Status.DetachError, status.Child("detachError"))...)
	// ValidateVolumeAttachmentV1.
	errs = append(errs, validateCSIDriverName(va.Spec.Attacher, field.NewPath("spec.attacher"))...)
	if n := src.PersistentVolumeName; n != nil && *n != "" {
		errs = append(errs, validateNameWith(apivalidation.NameIsDNSSubdomain, *n, field.NewPath("spec.source.persistentVolumeName"))...)
	}
	return errs
}

func validateVolumeError(e *storagev1.VolumeError, fldPath *field.Path) field.ErrorList {
	if e == nil {
		return nil
	}
	var errs field.ErrorList
	if len(e.Message) > maxVolumeErrorMessageSize {
		errs = append(errs, field.TooLong(fldPath.Child("message"), "", maxAttachedVolumeMetadata))
	}
	if e.ErrorCode != nil && *e.ErrorCode < 0 {
		errs = append(errs, field.Invalid(fldPath.Child("errorCode"), *e.ErrorCode, validation.InclusiveRangeError(0, math.MaxInt32)))
	}
	return errs
}

// validateVolumeAttachmentUpdate is ValidateVolumeAttachmentUpdate: the
// spec is read-only.
func validateVolumeAttachmentUpdate(va, old *storagev1.VolumeAttachment) field.ErrorList {
	errs := validateVolumeAttachment(va)
	if !apiequality.Semantic.DeepEqual(old.Spec, va.Spec) {
		errs = append(errs, field.Invalid(field.NewPath("spec"), va.Spec, "field is immutable"))
	}
	return errs
}

// validateCSINode is ValidateCSINode.
func validateCSINode(n *storagev1.CSINode) field.ErrorList {
	errs := validateObjectMeta(&n.ObjectMeta, false, apivalidation.NameIsDNSSubdomain, metaPath)
	drivers := field.NewPath("spec", "drivers")
	names := sets.New[string]()
	for i, d := range n.Spec.Drivers {
		p := drivers.Index(i)
		errs = append(errs, validateCSIDriverName(d.Name, p.Child("name"))...)
		if d.NodeID == "" {
			errs = append(errs, field.Required(p.Child("nodeID"), d.NodeID))
		}
		if len(d.NodeID) > csiNodeIDMaxLength {
			errs = append(errs, field.Invalid(p.Child("nodeID"), d.NodeID, fmt.Sprintf("must be %d characters or less", csiNodeIDMaxLength)))
		}
		if d.Allocatable != nil && d.Allocatable.Count != nil {
			errs = append(errs, apivalidation.ValidateNonnegativeField(int64(*d.Allocatable.Count), p.Child("allocatable", "count"))...)
		}
		if names.Has(d.Name) {
			errs = append(errs, field.Duplicate(p.Child("name"), d.Name))
		}
		names.Insert(d.Name)
		keys := sets.New[string]()
		for _, k := range d.TopologyKeys {
			if k == "" {
				errs = append(errs, field.Required(p, k))
			}
			if keys.Has(k) {
				errs = append(errs, field.Duplicate(p, k))
			}
			keys.Insert(k)
			errs = append(errs, validateQualifiedName(k, p)...)
		}
	}
	return errs
}

// validateCSINodeUpdate is ValidateCSINodeUpdate: a driver already listed
// may not change but for its allocatable count
// (MutableCSINodeAllocatableCount).
func validateCSINodeUpdate(n, old *storagev1.CSINode) field.ErrorList {
	errs := validateCSINode(n)
	for _, o := range old.Spec.Drivers {
		for _, d := range n.Spec.Drivers {
			if o.Name != d.Name {
				continue
			}
			o.Allocatable, d.Allocatable = nil, nil
			errs = append(errs, apivalidation.ValidateImmutableField(d, o, field.NewPath("spec").Child("drivers"))...)
		}
	}
	return errs
}

// validateCSIDriver is ValidateCSIDriver.
func validateCSIDriver(d *storagev1.CSIDriver) field.ErrorList {
	errs := validateObjectMeta(&d.ObjectMeta, false, apivalidation.NameIsDNSSubdomain, metaPath)
	return append(errs, validateCSIDriverSpec(&d.Spec, field.NewPath("spec"))...)
}

// validateCSIDriverUpdate is ValidateCSIDriverUpdate: attachRequired and
// the lifecycle modes are immutable.
func validateCSIDriverUpdate(d, old *storagev1.CSIDriver) field.ErrorList {
	errs := validateCSIDriverSpec(&d.Spec, field.NewPath("spec"))
	errs = append(errs, apivalidation.ValidateImmutableField(d.Spec.AttachRequired, old.Spec.AttachRequired, field.NewPath("spec", "attachedRequired"))...)
	return append(errs, apivalidation.ValidateImmutableField(d.Spec.VolumeLifecycleModes, old.Spec.VolumeLifecycleModes, field.NewPath("spec", "volumeLifecycleModes"))...)
}

func validateCSIDriverSpec(s *storagev1.CSIDriverSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, req := range []struct {
		name string
		set  bool
	}{
		{"attachedRequired", s.AttachRequired != nil},
		{"podInfoOnMount", s.PodInfoOnMount != nil},
		{"storageCapacity", s.StorageCapacity != nil},
	} {
		if !req.set {
			errs = append(errs, field.Required(fldPath.Child(req.name), ""))
		}
	}
	if p := s.FSGroupPolicy; p != nil && !sets.New(fsGroupPolicies...).Has(string(*p)) {
		errs = append(errs, field.NotSupported(fldPath.Child("fsGroupPolicy"), *p, fsGroupPolicies))
	}
	audiences := map[string]bool{}
	for i, tr := range s.TokenRequests {
		p := fldPath.Child("tokenRequests").Index(i)
		if audiences[tr.Audience] {
			errs = append(errs, field.Duplicate(p.Child("audience"), tr.Audience))
			continue
		}
		audiences[tr.Audience] = true
		if e := tr.ExpirationSeconds; e != nil {
			if *e < 600 {
				errs = append(errs, field.Invalid(p.Child("expirationSeconds"), *e, "may not specify a duration less than 10 minutes"))
			}
			if *e > 1<<32 {
				errs = append(errs, field.Invalid(p.Child("expirationSeconds"), *e, "may not specify a duration larger than 2^32 seconds"))
			}
		}
	}
	for _, m := range s.VolumeLifecycleModes {
		if !sets.New(lifecycleModes...).Has(string(m)) {
			errs = append(errs, field.NotSupported(fldPath.Child("volumeLifecycleModes"), m, lifecycleModes))
		}
	}
	if s.SELinuxMount == nil {
		errs = append(errs, field.Required(fldPath.Child("seLinuxMount"), ""))
	}
	if p := s.NodeAllocatableUpdatePeriodSeconds; p != nil && *p < 10 {
		errs = append(errs, field.Invalid(fldPath.Child("nodeAllocatableUpdatePeriodSeconds"), *p, "must be greater than or equal to 10 seconds"))
	}
	return errs
}
