package schemas

import (
	"encoding/json"
	"math"
	"reflect"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validateVolumes is ValidateVolumes. It returns the volumes that
// validated, by name, for the volume mount checks.
func validateVolumes(vols []corev1.Volume, fldPath *field.Path) (map[string]corev1.VolumeSource, field.ErrorList) {
	var errs field.ErrorList
	names := sets.New[string]()
	created := map[string]corev1.VolumeSource{}
	for i, v := range vols {
		idx := fldPath.Index(i)
		namePath := idx.Child("name")
		el := validateVolumeSource(&v.VolumeSource, idx)
		if v.Name == "" {
			el = append(el, field.Required(namePath, ""))
		} else {
			el = append(el, validateDNS1123Label(v.Name, namePath)...)
		}
		if names.Has(v.Name) {
			el = append(el, field.Duplicate(namePath, v.Name))
		}
		if len(el) == 0 {
			names.Insert(v.Name)
			created[v.Name] = v.VolumeSource
		} else {
			errs = append(errs, el...)
		}
	}
	return created, errs
}

// oneOf checks that exactly one of several fields is set, as kube's
// validation of volume sources and probe handlers does: each set field
// after the first is Forbidden with "may not specify more than 1 <what>",
// the first is validated, and none set is Required with "must specify a
// <what>".
type oneOf struct {
	path *field.Path
	what string
	n    int
	errs field.ErrorList
}

// add counts the field name if set and runs validate (may be nil) on it.
func (o *oneOf) add(set bool, name string, validate func(*field.Path) field.ErrorList) {
	if !set {
		return
	}
	if o.n > 0 {
		o.errs = append(o.errs, field.Forbidden(o.path.Child(name), "may not specify more than 1 "+o.what))
		return
	}
	o.n++
	if validate != nil {
		o.errs = append(o.errs, validate(o.path.Child(name))...)
	}
}

// result returns the errors, with the Required one when nothing was set.
func (o *oneOf) result() field.ErrorList {
	if o.n == 0 {
		return append(o.errs, field.Required(o.path, "must specify a "+o.what))
	}
	return o.errs
}

// validateVolumeSource checks that exactly one source is set, in the order
// kube checks them, and validates the sources kube validates most often.
func validateVolumeSource(src *corev1.VolumeSource, fldPath *field.Path) field.ErrorList {
	o := &oneOf{path: fldPath, what: "volume type"}
	one := o.add
	one(src.EmptyDir != nil, "emptyDir", func(p *field.Path) field.ErrorList {
		if src.EmptyDir.SizeLimit != nil && src.EmptyDir.SizeLimit.Cmp(resource.Quantity{}) < 0 {
			return field.ErrorList{field.Forbidden(p.Child("sizeLimit"), "SizeLimit field must be a valid resource quantity")}
		}
		return nil
	})
	one(src.HostPath != nil, "hostPath", func(p *field.Path) field.ErrorList {
		return validateHostPath(src.HostPath, p)
	})
	one(src.GitRepo != nil, "gitRepo", nil)
	one(src.GCEPersistentDisk != nil, "gcePersistentDisk", nil)
	one(src.AWSElasticBlockStore != nil, "awsElasticBlockStore", nil)
	one(src.Secret != nil, "secret", func(p *field.Path) field.ErrorList {
		var e field.ErrorList
		if src.Secret.SecretName == "" {
			e = append(e, field.Required(p.Child("secretName"), ""))
		}
		return append(e, validateProjection(src.Secret.DefaultMode, src.Secret.Items, p)...)
	})
	one(src.NFS != nil, "nfs", nil)
	one(src.ISCSI != nil, "iscsi", nil)
	one(src.Glusterfs != nil, "glusterfs", nil)
	one(src.FlexVolume != nil, "flexVolume", nil)
	one(src.PersistentVolumeClaim != nil, "persistentVolumeClaim", func(p *field.Path) field.ErrorList {
		if src.PersistentVolumeClaim.ClaimName == "" {
			return field.ErrorList{field.Required(p.Child("claimName"), "")}
		}
		return nil
	})
	one(src.RBD != nil, "rbd", nil)
	one(src.Cinder != nil, "cinder", nil)
	one(src.CephFS != nil, "cephFS", nil)
	one(src.Quobyte != nil, "quobyte", nil)
	one(src.DownwardAPI != nil, "downwardAPI", func(p *field.Path) field.ErrorList {
		return validateFileMode(src.DownwardAPI.DefaultMode, p.Child("defaultMode"))
	})
	one(src.FC != nil, "fc", nil)
	one(src.AzureFile != nil, "azureFile", nil)
	one(src.VsphereVolume != nil, "vsphereVolume", nil)
	one(src.PhotonPersistentDisk != nil, "photonPersistentDisk", nil)
	one(src.PortworxVolume != nil, "portworxVolume", nil)
	one(src.AzureDisk != nil, "azureDisk", nil)
	one(src.StorageOS != nil, "storageos", nil)
	one(src.Projected != nil, "projected", func(p *field.Path) field.ErrorList {
		return validateFileMode(src.Projected.DefaultMode, p.Child("defaultMode"))
	})
	one(src.ScaleIO != nil, "scaleIO", nil)
	one(src.CSI != nil, "csi", func(p *field.Path) field.ErrorList {
		if src.CSI.Driver == "" {
			return field.ErrorList{field.Required(p.Child("driver"), "")}
		}
		return nil
	})
	one(src.Ephemeral != nil, "ephemeral", nil)
	one(src.Image != nil, "image", func(p *field.Path) field.ErrorList {
		if src.Image.Reference == "" {
			return field.ErrorList{field.Required(p.Child("reference"), "")}
		}
		return nil
	})
	one(src.ConfigMap != nil, "configMap", func(p *field.Path) field.ErrorList {
		var e field.ErrorList
		if src.ConfigMap.Name == "" {
			e = append(e, field.Required(p.Child("name"), ""))
		}
		return append(e, validateProjection(src.ConfigMap.DefaultMode, src.ConfigMap.Items, p)...)
	})
	return o.result()
}

func validateFileMode(mode *int32, fldPath *field.Path) field.ErrorList {
	if mode != nil && (*mode > 0777 || *mode < 0) {
		return field.ErrorList{field.Invalid(fldPath, *mode, fileModeErrorMsg)}
	}
	return nil
}

// validateProjection checks the default mode and items of configMap and
// secret volumes.
func validateProjection(mode *int32, items []corev1.KeyToPath, fldPath *field.Path) field.ErrorList {
	errs := validateFileMode(mode, fldPath.Child("defaultMode"))
	for i, kp := range items {
		p := fldPath.Child("items").Index(i)
		if kp.Key == "" {
			errs = append(errs, field.Required(p.Child("key"), ""))
		}
		if kp.Path == "" {
			errs = append(errs, field.Required(p.Child("path"), ""))
		}
		errs = append(errs, validateLocalNonReservedPath(kp.Path, p.Child("path"))...)
		errs = append(errs, validateFileMode(kp.Mode, p.Child("mode"))...)
	}
	return errs
}

var supportedHostPathTypes = sets.New(
	string(corev1.HostPathUnset), string(corev1.HostPathDirectoryOrCreate),
	string(corev1.HostPathDirectory), string(corev1.HostPathFileOrCreate),
	string(corev1.HostPathFile), string(corev1.HostPathSocket),
	string(corev1.HostPathCharDev), string(corev1.HostPathBlockDev))

func validateHostPath(h *corev1.HostPathVolumeSource, fldPath *field.Path) field.ErrorList {
	if h.Path == "" {
		return field.ErrorList{field.Required(fldPath.Child("path"), "")}
	}
	errs := validatePathNoBacksteps(h.Path, fldPath.Child("path"))
	if h.Type != nil && !supportedHostPathTypes.Has(string(*h.Type)) {
		errs = append(errs, field.NotSupported(fldPath.Child("type"), *h.Type, sets.List(supportedHostPathTypes)))
	}
	return errs
}

// Pod updates.

// podUpdateForbidden is the start of the message kube returns when an
// update changes a pod spec field that may not change.
const podUpdateForbidden = "pod updates may not change fields other than `spec.containers[*].image`," +
	"`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations)," +
	"`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)"

// validatePodUpdate is ValidatePodUpdate: the update is validated like a
// create, and then only images, activeDeadlineSeconds (down, or from unset),
// added tolerations and removed scheduling gates may change in the spec.
func validatePodUpdate(pod, old *corev1.Pod) field.ErrorList {
	errs := validateObjectMetaUpdate(&pod.ObjectMeta, &old.ObjectMeta, field.NewPath("metadata"))
	errs = append(errs, validatePodMetadataAndSpec(pod)...)
	specPath := field.NewPath("spec")

	cerrs, stop := validateContainerUpdates(pod.Spec.Containers, old.Spec.Containers, specPath.Child("containers"))
	errs = append(errs, cerrs...)
	if stop {
		return errs
	}
	cerrs, stop = validateContainerUpdates(pod.Spec.InitContainers, old.Spec.InitContainers, specPath.Child("initContainers"))
	errs = append(errs, cerrs...)
	if stop {
		return errs
	}

	// activeDeadlineSeconds may go from unset to set, or down.
	adsPath := specPath.Child("activeDeadlineSeconds")
	if pod.Spec.ActiveDeadlineSeconds != nil {
		v := *pod.Spec.ActiveDeadlineSeconds
		if v < 0 || v > math.MaxInt32 {
			return append(errs, field.Invalid(adsPath, v, validation.InclusiveRangeError(0, math.MaxInt32)))
		}
		if old.Spec.ActiveDeadlineSeconds != nil && *old.Spec.ActiveDeadlineSeconds < v {
			return append(errs, field.Invalid(adsPath, v, "must be less than or equal to previous value"))
		}
	} else if old.Spec.ActiveDeadlineSeconds != nil {
		errs = append(errs, field.Invalid(adsPath, pod.Spec.ActiveDeadlineSeconds, "must not update from a positive integer to nil value"))
	}

	errs = append(errs, validateOnlyAddedTolerations(pod.Spec.Tolerations, old.Spec.Tolerations, specPath.Child("tolerations"))...)
	errs = append(errs, validateOnlyDeletedSchedulingGates(pod.Spec.SchedulingGates, old.Spec.SchedulingGates, specPath.Child("schedulingGates"))...)

	if apiequality.Semantic.DeepEqual(pod.Spec, old.Spec) {
		return errs
	}
	// Put back what may change and compare what is left.
	munged := *pod.Spec.DeepCopy()
	for i := range munged.Containers {
		munged.Containers[i].Image = old.Spec.Containers[i].Image
	}
	for i := range munged.InitContainers {
		munged.InitContainers[i].Image = old.Spec.InitContainers[i].Image
	}
	munged.ActiveDeadlineSeconds = old.Spec.ActiveDeadlineSeconds
	munged.SchedulingGates = old.Spec.SchedulingGates
	munged.Tolerations = old.Spec.Tolerations
	if g := old.Spec.TerminationGracePeriodSeconds; g != nil && *g < 0 &&
		munged.TerminationGracePeriodSeconds != nil && *munged.TerminationGracePeriodSeconds == 1 {
		munged.TerminationGracePeriodSeconds = g
	}
	// Gated pods may gain node selector entries.
	if len(old.Spec.SchedulingGates) > 0 && addsOnlyNodeSelectors(munged.NodeSelector, old.Spec.NodeSelector) {
		munged.NodeSelector = old.Spec.NodeSelector
	}
	if !apiequality.Semantic.DeepEqual(munged, old.Spec) {
		errs = append(errs, field.Forbidden(specPath, podUpdateForbidden+"\n"+specDiff(old.Spec, munged)))
	}
	return errs
}

func addsOnlyNodeSelectors(updated, old map[string]string) bool {
	for k, v := range old {
		if nv, ok := updated[k]; !ok || nv != v {
			return false
		}
	}
	return true
}

func validateContainerUpdates(cs, old []corev1.Container, fldPath *field.Path) (field.ErrorList, bool) {
	if len(cs) != len(old) {
		return field.ErrorList{field.Forbidden(fldPath, "pod updates may not add or remove containers")}, true
	}
	var errs field.ErrorList
	for i, c := range cs {
		if c.Image == "" {
			errs = append(errs, field.Required(fldPath.Index(i).Child("image"), ""))
		}
		if strings.TrimSpace(c.Image) != c.Image {
			errs = append(errs, field.Invalid(fldPath.Index(i).Child("image"), c.Image, "must not have leading or trailing whitespace"))
		}
	}
	return errs, false
}

func validateOnlyAddedTolerations(ts, old []corev1.Toleration, fldPath *field.Path) field.ErrorList {
	for _, o := range old {
		found := false
		for _, t := range ts {
			// tolerationSeconds may change.
			oc := *o.DeepCopy()
			oc.TolerationSeconds = t.TolerationSeconds
			if reflect.DeepEqual(oc, t) {
				found = true
				break
			}
		}
		if !found {
			return field.ErrorList{field.Forbidden(fldPath, "existing toleration can not be modified except its tolerationSeconds")}
		}
	}
	return validateTolerations(ts, fldPath)
}

func validateOnlyDeletedSchedulingGates(gates, old []corev1.PodSchedulingGate, fldPath *field.Path) field.ErrorList {
	if len(gates) == 0 {
		return nil
	}
	had := sets.New[string]()
	for _, g := range old {
		had.Insert(g.Name)
	}
	for i, g := range gates {
		if !had.Has(g.Name) {
			return field.ErrorList{field.Forbidden(fldPath.Index(i), "only deletion is allowed, but found new scheduling gate '"+g.Name+"'")}
		}
	}
	return nil
}

// validatePodStatusUpdate is ValidatePodStatusUpdate (the parts ported).
func validatePodStatusUpdate(pod, old *corev1.Pod) field.ErrorList {
	metaPath := field.NewPath("metadata")
	errs := validateObjectMetaUpdate(&pod.ObjectMeta, &old.ObjectMeta, metaPath)
	statusPath := field.NewPath("status")
	if pod.Spec.NodeName != old.Spec.NodeName {
		errs = append(errs, field.Forbidden(statusPath.Child("nodeName"), "may not be changed directly"))
	}
	if n := pod.Status.NominatedNodeName; n != old.Status.NominatedNodeName && n != "" {
		errs = append(errs, validateNameWith(apivalidation.NameIsDNSSubdomain, n, statusPath.Child("nominatedNodeName"))...)
	}
	for i, ip := range pod.Status.PodIPs {
		errs = append(errs, validation.IsValidIP(statusPath.Child("podIPs").Index(i).Child("ip"), ip.IP)...)
	}
	for i, ip := range pod.Status.HostIPs {
		errs = append(errs, validation.IsValidIP(statusPath.Child("hostIPs").Index(i).Child("ip"), ip.IP)...)
	}
	return errs
}

// specDiff renders what changed between two specs, as lines of their
// indented JSON prefixed with "-" (old) and "+" (new). kube prints a go-cmp
// diff here; clients only read the message before it.
func specDiff(old, updated any) string {
	a, errA := json.MarshalIndent(old, "", "  ")
	b, errB := json.MarshalIndent(updated, "", "  ")
	if errA != nil || errB != nil {
		return ""
	}
	x, y := strings.Split(string(a), "\n"), strings.Split(string(b), "\n")
	// Longest common subsequence of lines.
	lcs := make([][]int, len(x)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(y)+1)
	}
	for i := len(x) - 1; i >= 0; i-- {
		for j := len(y) - 1; j >= 0; j-- {
			if x[i] == y[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var sb strings.Builder
	i, j := 0, 0
	for i < len(x) || j < len(y) {
		switch {
		case i < len(x) && j < len(y) && x[i] == y[j]:
			i, j = i+1, j+1
		case j < len(y) && (i == len(x) || lcs[i][j+1] >= lcs[i+1][j]):
			sb.WriteString("+ " + y[j] + "\n")
			j++
		default:
			sb.WriteString("- " + x[i] + "\n")
			i++
		}
	}
	return sb.String()
}
