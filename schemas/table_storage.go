package schemas

import (
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The storage printers of kube's pkg/printers/internalversion/printers.go:
// printPersistentVolume, printPersistentVolumeClaim, printStorageClass,
// printCSIDriver, printCSINode and printVolumeAttachment.

func persistentVolumeTable(now func() time.Time) *table {
	spec, status := corev1.PersistentVolumeSpec{}.SwaggerDoc(), corev1.PersistentVolumeStatus{}.SwaggerDoc()
	cols := []metav1.TableColumnDefinition{
		nameColumn,
		{Name: "Capacity", Type: "string", Description: spec["capacity"]},
		{Name: "Access Modes", Type: "string", Description: spec["accessModes"]},
		{Name: "Reclaim Policy", Type: "string", Description: spec["persistentVolumeReclaimPolicy"]},
		{Name: "Status", Type: "string", Description: status["phase"]},
		{Name: "Claim", Type: "string", Description: spec["claimRef"]},
		{Name: "StorageClass", Type: "string", Description: "StorageClass of the pv"},
		{Name: "VolumeAttributesClass", Type: "string", Description: "VolumeAttributesClass of the pv"},
		{Name: "Reason", Type: "string", Description: status["reason"]},
		ageColumn,
		{Name: "VolumeMode", Type: "string", Priority: 1, Description: spec["volumeMode"]},
	}
	return tableOf(cols, func(pv *corev1.PersistentVolume) []any {
		claim := ""
		if r := pv.Spec.ClaimRef; r != nil {
			claim = r.Namespace + "/" + r.Name
		}
		phase := string(pv.Status.Phase)
		if pv.DeletionTimestamp != nil {
			phase = "Terminating"
		}
		size := pv.Spec.Capacity[corev1.ResourceStorage]
		return []any{pv.Name, size.String(), AccessModesString(pv.Spec.AccessModes), string(pv.Spec.PersistentVolumeReclaimPolicy),
			phase, claim, VolumeClass(pv), unsetOr(pv.Spec.VolumeAttributesClassName), pv.Status.Reason,
			since(now, pv.CreationTimestamp), unsetOr((*string)(pv.Spec.VolumeMode))}
	})
}

func persistentVolumeClaimTable(now func() time.Time) *table {
	spec, status := corev1.PersistentVolumeClaimSpec{}.SwaggerDoc(), corev1.PersistentVolumeClaimStatus{}.SwaggerDoc()
	cols := []metav1.TableColumnDefinition{
		nameColumn,
		{Name: "Status", Type: "string", Description: status["phase"]},
		{Name: "Volume", Type: "string", Description: spec["volumeName"]},
		{Name: "Capacity", Type: "string", Description: status["capacity"]},
		{Name: "Access Modes", Type: "string", Description: status["accessModes"]},
		{Name: "StorageClass", Type: "string", Description: "StorageClass of the pvc"},
		{Name: "VolumeAttributesClass", Type: "string", Description: "VolumeAttributesClass of the pvc"},
		ageColumn,
		{Name: "VolumeMode", Type: "string", Priority: 1, Description: spec["volumeMode"]},
	}
	return tableOf(cols, func(pvc *corev1.PersistentVolumeClaim) []any {
		phase := string(pvc.Status.Phase)
		if pvc.DeletionTimestamp != nil {
			phase = "Terminating"
		}
		capacity, modes := "", ""
		if pvc.Spec.VolumeName != "" {
			modes = AccessModesString(pvc.Status.AccessModes)
			q := pvc.Status.Capacity[corev1.ResourceStorage]
			capacity = q.String()
		}
		return []any{pvc.Name, phase, pvc.Spec.VolumeName, capacity, modes, ClaimClass(pvc),
			unsetOr(pvc.Spec.VolumeAttributesClassName), since(now, pvc.CreationTimestamp), unsetOr((*string)(pvc.Spec.VolumeMode))}
	})
}

// AccessModesString is GetAccessModesAsString: RWO, ROX, RWX and RWOP, in
// that order, each once.
func AccessModesString(modes []corev1.PersistentVolumeAccessMode) string {
	var out []string
	for _, m := range []struct {
		mode  corev1.PersistentVolumeAccessMode
		short string
	}{
		{corev1.ReadWriteOnce, "RWO"}, {corev1.ReadOnlyMany, "ROX"}, {corev1.ReadWriteMany, "RWX"}, {corev1.ReadWriteOncePod, "RWOP"},
	} {
		if slices.Contains(modes, m.mode) {
			out = append(out, m.short)
		}
	}
	return strings.Join(out, ",")
}

// unsetOr is the printers' "<unset>" for a nil string.
func unsetOr[S ~string](s *S) string {
	if s == nil {
		return "<unset>"
	}
	return string(*s)
}

func storageClassTable(now func() time.Time) *table {
	doc := storagev1.StorageClass{}.SwaggerDoc()
	cols := []metav1.TableColumnDefinition{
		nameColumn,
		{Name: "Provisioner", Type: "string", Description: doc["provisioner"]},
		{Name: "ReclaimPolicy", Type: "string", Description: doc["reclaimPolicy"]},
		{Name: "VolumeBindingMode", Type: "string", Description: doc["volumeBindingMode"]},
		{Name: "AllowVolumeExpansion", Type: "string", Description: doc["allowVolumeExpansion"]},
		ageColumn,
	}
	return tableOf(cols, func(sc *storagev1.StorageClass) []any {
		name := sc.Name
		if IsDefaultStorageClass(sc) {
			name += " (default)"
		}
		reclaim := string(corev1.PersistentVolumeReclaimDelete)
		if sc.ReclaimPolicy != nil {
			reclaim = string(*sc.ReclaimPolicy)
		}
		binding := string(storagev1.VolumeBindingImmediate)
		if sc.VolumeBindingMode != nil {
			binding = string(*sc.VolumeBindingMode)
		}
		return []any{name, sc.Provisioner, reclaim, binding, boolOr(sc.AllowVolumeExpansion, false), since(now, sc.CreationTimestamp)}
	})
}

func boolOr(b *bool, def bool) bool {
	if b == nil {
		return def
	}
	return *b
}

func csiDriverTable(now func() time.Time) *table {
	doc := storagev1.CSIDriverSpec{}.SwaggerDoc()
	cols := []metav1.TableColumnDefinition{
		nameColumn,
		{Name: "AttachRequired", Type: "boolean", Description: doc["attachRequired"]},
		{Name: "PodInfoOnMount", Type: "boolean", Description: doc["podInfoOnMount"]},
		{Name: "StorageCapacity", Type: "boolean", Description: doc["storageCapacity"]},
		{Name: "TokenRequests", Type: "string", Description: doc["tokenRequests"]},
		{Name: "RequiresRepublish", Type: "boolean", Description: doc["requiresRepublish"]},
		{Name: "Modes", Type: "string", Description: doc["volumeLifecycleModes"]},
		ageColumn,
	}
	return tableOf(cols, func(d *storagev1.CSIDriver) []any {
		s := d.Spec
		tokens := "<unset>"
		if len(s.TokenRequests) > 0 {
			var auds []string
			for _, t := range s.TokenRequests {
				auds = append(auds, t.Audience)
			}
			tokens = strings.Join(auds, ",")
		}
		var modes []string
		for _, m := range s.VolumeLifecycleModes {
			modes = append(modes, string(m))
		}
		mode := strings.Join(modes, ",")
		if mode == "" {
			mode = "<none>"
		}
		return []any{d.Name, boolOr(s.AttachRequired, true), boolOr(s.PodInfoOnMount, false), boolOr(s.StorageCapacity, false),
			tokens, boolOr(s.RequiresRepublish, false), mode, since(now, d.CreationTimestamp)}
	})
}

func csiNodeTable(now func() time.Time) *table {
	cols := []metav1.TableColumnDefinition{
		nameColumn,
		{Name: "Drivers", Type: "integer", Description: "Drivers indicates the number of CSI drivers registered on the node"},
		ageColumn,
	}
	return tableOf(cols, func(n *storagev1.CSINode) []any {
		return []any{n.Name, int64(len(n.Spec.Drivers)), since(now, n.CreationTimestamp)}
	})
}

func volumeAttachmentTable(now func() time.Time) *table {
	spec := storagev1.VolumeAttachmentSpec{}.SwaggerDoc()
	cols := []metav1.TableColumnDefinition{
		nameColumn,
		{Name: "Attacher", Type: "string", Format: "name", Description: spec["attacher"]},
		{Name: "PV", Type: "string", Description: storagev1.VolumeAttachmentSource{}.SwaggerDoc()["persistentVolumeName"]},
		{Name: "Node", Type: "string", Description: spec["nodeName"]},
		{Name: "Attached", Type: "boolean", Description: storagev1.VolumeAttachmentStatus{}.SwaggerDoc()["attached"]},
		ageColumn,
	}
	return tableOf(cols, func(va *storagev1.VolumeAttachment) []any {
		pv := ""
		if n := va.Spec.Source.PersistentVolumeName; n != nil {
			pv = *n
		}
		return []any{va.Name, va.Spec.Attacher, pv, va.Spec.NodeName, va.Status.Attached, since(now, va.CreationTimestamp)}
	})
}
