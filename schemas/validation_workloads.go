package schemas

import (
	"encoding/json"
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// This file ports the validation of apps/v1 ControllerRevisions,
// DaemonSets and StatefulSets from pkg/apis/apps/validation, with the
// immutable fields their registry strategies add for apps/v1.

// Controller revisions.

// validateControllerRevision is what create and update share: the name
// and a non-negative revision.
func validateControllerRevision(cr *appsv1.ControllerRevision) field.ErrorList {
	errs := validateObjectMeta(&cr.ObjectMeta, true, apivalidation.NameIsDNSSubdomain, metaPath)
	return append(errs, apivalidation.ValidateNonnegativeField(cr.Revision, field.NewPath("revision"))...)
}

// validateControllerRevisionCreate is ValidateControllerRevisionCreate:
// the data must be a JSON object.
func validateControllerRevisionCreate(cr *appsv1.ControllerRevision) field.ErrorList {
	errs := validateControllerRevision(cr)
	dataPath := field.NewPath("data")
	if cr.Data.Raw == nil {
		return append(errs, field.Required(dataPath, "data is mandatory"))
	}
	var v any
	if err := json.Unmarshal(cr.Data.Raw, &v); err != nil {
		return append(errs, field.Invalid(dataPath, "<value omitted>", "error parsing data: "+err.Error()))
	}
	if v == nil {
		return append(errs, field.Required(dataPath, "data is mandatory"))
	}
	if _, ok := v.(map[string]any); !ok {
		errs = append(errs, field.Required(dataPath, "data must be a valid JSON object"))
	}
	return errs
}

func validateControllerRevisionUpdate(cr, old *appsv1.ControllerRevision) field.ErrorList {
	errs := validateObjectMetaUpdate(&cr.ObjectMeta, &old.ObjectMeta, metaPath)
	errs = append(errs, validateControllerRevision(cr)...)
	return append(errs, apivalidation.ValidateImmutableField(cr.Data, old.Data, field.NewPath("data"))...)
}

// Daemon sets.

func validateDaemonSet(ds *appsv1.DaemonSet) field.ErrorList {
	errs := validateObjectMeta(&ds.ObjectMeta, true, apivalidation.NameIsDNSSubdomain, metaPath)
	return append(errs, validateDaemonSetSpec(&ds.Spec, metav1validation.LabelSelectorValidationOptions{}, field.NewPath("spec"))...)
}

// validateDaemonSetUpdate is ValidateDaemonSetUpdate plus the apps/v1
// strategy's immutable selector. A selector stored with label values kube
// now refuses may keep them.
func validateDaemonSetUpdate(ds, old *appsv1.DaemonSet) field.ErrorList {
	errs := validateObjectMetaUpdate(&ds.ObjectMeta, &old.ObjectMeta, metaPath)
	opts := metav1validation.LabelSelectorValidationOptions{AllowInvalidLabelValueInSelector: metav1validation.LabelSelectorHasInvalidLabelValue(old.Spec.Selector)}
	errs = append(errs, validateDaemonSetSpec(&ds.Spec, opts, field.NewPath("spec"))...)
	return append(errs, apivalidation.ValidateImmutableField(ds.Spec.Selector, old.Spec.Selector, field.NewPath("spec", "selector"))...)
}

func validateDaemonSetSpec(s *appsv1.DaemonSetSpec, opts metav1validation.LabelSelectorValidationOptions, fldPath *field.Path) field.ErrorList {
	errs := metav1validation.ValidateLabelSelector(s.Selector, opts, fldPath.Child("selector"))
	// A missing selector selects nothing, so it matches no template.
	if selector, err := metav1.LabelSelectorAsSelector(s.Selector); err == nil && !selector.Matches(labels.Set(s.Template.Labels)) {
		errs = append(errs, field.Invalid(fldPath.Child("template", "metadata", "labels"), s.Template.Labels, "`selector` does not match template `labels`"))
	}
	if s.Selector != nil && len(s.Selector.MatchLabels)+len(s.Selector.MatchExpressions) == 0 {
		errs = append(errs, field.Invalid(fldPath.Child("selector"), s.Selector, "empty selector is invalid for daemonset"))
	}
	tPath := fldPath.Child("template")
	errs = append(errs, validatePodTemplateSpec(&s.Template, tPath)...)
	if s.Template.Spec.RestartPolicy != corev1.RestartPolicyAlways {
		errs = append(errs, field.NotSupported(tPath.Child("spec", "restartPolicy"), s.Template.Spec.RestartPolicy, []string{string(corev1.RestartPolicyAlways)}))
	}
	if s.Template.Spec.ActiveDeadlineSeconds != nil {
		errs = append(errs, field.Forbidden(tPath.Child("spec", "activeDeadlineSeconds"), "activeDeadlineSeconds in DaemonSet is not Supported"))
	}
	errs = append(errs, apivalidation.ValidateNonnegativeField(int64(s.MinReadySeconds), fldPath.Child("minReadySeconds"))...)
	errs = append(errs, validateDaemonSetUpdateStrategy(&s.UpdateStrategy, fldPath.Child("updateStrategy"))...)
	if s.RevisionHistoryLimit != nil {
		errs = append(errs, apivalidation.ValidateNonnegativeField(int64(*s.RevisionHistoryLimit), fldPath.Child("revisionHistoryLimit"))...)
	}
	return errs
}

func validateDaemonSetUpdateStrategy(s *appsv1.DaemonSetUpdateStrategy, fldPath *field.Path) field.ErrorList {
	switch s.Type {
	case appsv1.OnDeleteDaemonSetStrategyType:
	case appsv1.RollingUpdateDaemonSetStrategyType:
		if s.RollingUpdate == nil {
			return field.ErrorList{field.Required(fldPath.Child("rollingUpdate"), "")}
		}
		return validateRollingUpdateDaemonSet(s.RollingUpdate, fldPath.Child("rollingUpdate"))
	default:
		valid := []string{string(appsv1.RollingUpdateDaemonSetStrategyType), string(appsv1.OnDeleteDaemonSetStrategyType)}
		return field.ErrorList{field.NotSupported(fldPath, *s, valid)}
	}
	return nil
}

// validateRollingUpdateDaemonSet: both limits are counts or percentages up
// to 100%, and exactly one of them is non-zero.
func validateRollingUpdateDaemonSet(ru *appsv1.RollingUpdateDaemonSet, fldPath *field.Path) field.ErrorList {
	maxUnavailable, maxSurge := intOrZero(ru.MaxUnavailable), intOrZero(ru.MaxSurge)
	errs := validatePositiveIntOrPercent(maxUnavailable, fldPath.Child("maxUnavailable"))
	errs = append(errs, validatePositiveIntOrPercent(maxSurge, fldPath.Child("maxSurge"))...)
	errs = append(errs, isNotMoreThan100Percent(maxUnavailable, fldPath.Child("maxUnavailable"))...)
	errs = append(errs, isNotMoreThan100Percent(maxSurge, fldPath.Child("maxSurge"))...)
	hasUnavailable, hasSurge := intOrPercentValue(maxUnavailable) != 0, intOrPercentValue(maxSurge) != 0
	switch {
	case hasUnavailable && hasSurge:
		errs = append(errs, field.Invalid(fldPath.Child("maxSurge"), maxSurge, "may not be set when maxUnavailable is non-zero"))
	case !hasUnavailable && !hasSurge:
		errs = append(errs, field.Required(fldPath.Child("maxUnavailable"), "cannot be 0 when maxSurge is 0"))
	}
	return errs
}

func validateDaemonSetStatusUpdate(ds, old *appsv1.DaemonSet) field.ErrorList {
	errs := validateObjectMetaUpdate(&ds.ObjectMeta, &old.ObjectMeta, metaPath)
	p := field.NewPath("status")
	st := ds.Status
	errs = append(errs, nonNegative(p, n32("currentNumberScheduled", st.CurrentNumberScheduled), n32("numberMisscheduled", st.NumberMisscheduled),
		n32("desiredNumberScheduled", st.DesiredNumberScheduled), n32("numberReady", st.NumberReady),
		n64("observedGeneration", st.ObservedGeneration), n32("updatedNumberScheduled", st.UpdatedNumberScheduled),
		n32("numberAvailable", st.NumberAvailable), n32("numberUnavailable", st.NumberUnavailable))...)
	return append(errs, validateCollisionCount(st.CollisionCount, old.Status.CollisionCount, p.Child("collisionCount"))...)
}

// validateCollisionCount: a collision count is not negative and never
// goes down.
func validateCollisionCount(cc, old *int32, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if cc != nil {
		errs = apivalidation.ValidateNonnegativeField(int64(*cc), fldPath)
	}
	if old != nil && (cc == nil || *cc < *old) {
		errs = append(errs, field.Invalid(fldPath, int32OrZero(cc), "cannot be decremented"))
	}
	return errs
}

// Stateful sets.

// persistentVolumeClaimRetentionPolicies are the supported policy types,
// sorted as kube lists them.
var persistentVolumeClaimRetentionPolicies = []string{
	string(appsv1.DeletePersistentVolumeClaimRetentionPolicyType), string(appsv1.RetainPersistentVolumeClaimRetentionPolicyType),
}

// stsOptions are kube's StatefulSetValidationOptions.
type stsOptions struct {
	allowInvalidServiceName          bool
	skipValidatePodTemplateSpec      bool
	skipValidateVolumeClaimTemplates bool
}

// validateStatefulSet is ValidateStatefulSet: the name is a DNS label,
// because it prefixes the pods' hostnames.
func validateStatefulSet(sts *appsv1.StatefulSet) field.ErrorList {
	errs := validateObjectMeta(&sts.ObjectMeta, true, apivalidation.NameIsDNSLabel, metaPath)
	return append(errs, validateStatefulSetSpec(&sts.Spec, stsOptions{}, field.NewPath("spec"))...)
}

// validateStatefulSetUpdate is ValidateStatefulSetUpdate: the name is not
// checked again, what is immutable anyway (the service name, the claim
// templates) may keep values kube no longer accepts, a template stored
// invalid is not validated again, and only replicas, ordinals, template,
// updateStrategy, revisionHistoryLimit,
// persistentVolumeClaimRetentionPolicy and minReadySeconds may change.
func validateStatefulSetUpdate(sts, old *appsv1.StatefulSet) field.ErrorList {
	errs := validateObjectMetaUpdate(&sts.ObjectMeta, &old.ObjectMeta, metaPath)
	opts := stsOptions{allowInvalidServiceName: true, skipValidateVolumeClaimTemplates: true}
	if len(validateStatefulSetSpec(&old.Spec, opts, field.NewPath("spec"))) > 0 {
		opts.skipValidatePodTemplateSpec = true
	}
	errs = append(errs, validateStatefulSetSpec(&sts.Spec, opts, field.NewPath("spec"))...)
	clone := sts.Spec.DeepCopy()
	clone.Replicas = old.Spec.Replicas
	clone.Template = old.Spec.Template
	clone.UpdateStrategy = old.Spec.UpdateStrategy
	clone.MinReadySeconds = old.Spec.MinReadySeconds
	clone.Ordinals = old.Spec.Ordinals
	clone.RevisionHistoryLimit = old.Spec.RevisionHistoryLimit
	clone.PersistentVolumeClaimRetentionPolicy = old.Spec.PersistentVolumeClaimRetentionPolicy
	if !apiequality.Semantic.DeepEqual(*clone, old.Spec) {
		errs = append(errs, field.Forbidden(field.NewPath("spec"), "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden"))
	}
	return errs
}

func validateStatefulSetSpec(s *appsv1.StatefulSetSpec, opts stsOptions, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch s.PodManagementPolicy {
	case "":
		errs = append(errs, field.Required(fldPath.Child("podManagementPolicy"), ""))
	case appsv1.OrderedReadyPodManagement, appsv1.ParallelPodManagement:
	default:
		errs = append(errs, field.Invalid(fldPath.Child("podManagementPolicy"), s.PodManagementPolicy,
			fmt.Sprintf("must be '%s' or '%s'", appsv1.OrderedReadyPodManagement, appsv1.ParallelPodManagement)))
	}
	errs = append(errs, validateStatefulSetUpdateStrategy(&s.UpdateStrategy, fldPath.Child("updateStrategy"))...)
	if p := s.PersistentVolumeClaimRetentionPolicy; p != nil {
		pPath := fldPath.Child("persistentVolumeClaimRetentionPolicy")
		for _, f := range []struct {
			name string
			v    appsv1.PersistentVolumeClaimRetentionPolicyType
		}{{"whenDeleted", p.WhenDeleted}, {"whenScaled", p.WhenScaled}} {
			if !slices.Contains(persistentVolumeClaimRetentionPolicies, string(f.v)) {
				errs = append(errs, field.NotSupported(pPath.Child(f.name), f.v, persistentVolumeClaimRetentionPolicies))
			}
		}
	}
	if !opts.skipValidateVolumeClaimTemplates {
		for i := range s.VolumeClaimTemplates {
			errs = append(errs, validateClaimTemplateSpec(&s.VolumeClaimTemplates[i].Spec, fldPath.Child("volumeClaimTemplates").Index(i).Child("spec"))...)
		}
	}
	errs = append(errs, nonNegative(fldPath, n32("replicas", int32OrZero(s.Replicas)), n32("minReadySeconds", s.MinReadySeconds))...)
	if s.Ordinals != nil {
		errs = append(errs, apivalidation.ValidateNonnegativeField(int64(s.Ordinals.Start), fldPath.Child("ordinals.start"))...)
	}
	if !opts.allowInvalidServiceName && s.ServiceName != "" {
		errs = append(errs, validateDNS1123Label(s.ServiceName, fldPath.Child("serviceName"))...)
	}
	selPath := fldPath.Child("selector")
	if s.Selector == nil {
		errs = append(errs, field.Required(selPath, ""))
	} else {
		errs = append(errs, metav1validation.ValidateLabelSelector(s.Selector, metav1validation.LabelSelectorValidationOptions{}, selPath)...)
		if len(s.Selector.MatchLabels)+len(s.Selector.MatchExpressions) == 0 {
			errs = append(errs, field.Invalid(selPath, s.Selector, "empty selector is invalid for statefulset"))
		}
	}
	tPath := fldPath.Child("template")
	if selector, err := metav1.LabelSelectorAsSelector(s.Selector); err != nil {
		errs = append(errs, field.Invalid(selPath, s.Selector, ""))
	} else {
		if !selector.Empty() && !selector.Matches(labels.Set(s.Template.Labels)) {
			errs = append(errs, field.Invalid(tPath.Child("metadata", "labels"), s.Template.Labels, "`selector` does not match template `labels`"))
		}
		if !opts.skipValidatePodTemplateSpec {
			errs = append(errs, validatePodTemplateSpec(statefulSetPodTemplate(s), tPath)...)
		}
	}
	if s.Template.Spec.RestartPolicy != corev1.RestartPolicyAlways {
		errs = append(errs, field.NotSupported(tPath.Child("spec", "restartPolicy"), s.Template.Spec.RestartPolicy, []string{string(corev1.RestartPolicyAlways)}))
	}
	if s.Template.Spec.ActiveDeadlineSeconds != nil {
		errs = append(errs, field.Forbidden(tPath.Child("spec", "activeDeadlineSeconds"), "activeDeadlineSeconds in StatefulSet is not Supported"))
	}
	return errs
}

// statefulSetPodTemplate is the template as the controller makes its pods
// from it: the hostname and subdomain it sets itself are left out, and
// each volume claim template is a volume (in place of a template volume of
// the same name), so that mounts of a claim validate.
func statefulSetPodTemplate(s *appsv1.StatefulSetSpec) *corev1.PodTemplateSpec {
	t := &s.Template
	if t.Spec.Subdomain == "" && t.Spec.Hostname == "" && len(s.VolumeClaimTemplates) == 0 {
		return t
	}
	t = t.DeepCopy()
	t.Spec.Subdomain, t.Spec.Hostname = "", ""
	if len(s.VolumeClaimTemplates) == 0 {
		return t
	}
	claims := map[string]bool{}
	vols := make([]corev1.Volume, 0, len(s.VolumeClaimTemplates)+len(t.Spec.Volumes))
	for _, c := range s.VolumeClaimTemplates {
		if claims[c.Name] {
			continue
		}
		claims[c.Name] = true
		vols = append(vols, corev1.Volume{Name: c.Name, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: c.Name},
		}})
	}
	for _, v := range t.Spec.Volumes {
		if !claims[v.Name] {
			vols = append(vols, v)
		}
	}
	t.Spec.Volumes = vols
	return t
}

// Access and volume modes a claim may ask for, sorted as kube lists them.
var (
	claimAccessModes = []string{string(corev1.ReadOnlyMany), string(corev1.ReadWriteMany), string(corev1.ReadWriteOnce), string(corev1.ReadWriteOncePod)}
	claimVolumeModes = []string{string(corev1.PersistentVolumeBlock), string(corev1.PersistentVolumeFilesystem)}
)

// validateClaimTemplateSpec validates a claim template's spec as
// ValidatePersistentVolumeClaimSpec does.
func validateClaimTemplateSpec(s *corev1.PersistentVolumeClaimSpec, fldPath *field.Path) field.ErrorList {
	return validatePersistentVolumeClaimSpec(s, fldPath)
}

func validateStatefulSetUpdateStrategy(s *appsv1.StatefulSetUpdateStrategy, fldPath *field.Path) field.ErrorList {
	switch s.Type {
	case "":
		return field.ErrorList{field.Required(fldPath, "")}
	case appsv1.OnDeleteStatefulSetStrategyType:
		if s.RollingUpdate != nil {
			return field.ErrorList{field.Invalid(fldPath.Child("rollingUpdate"), s.RollingUpdate,
				fmt.Sprintf("only allowed for updateStrategy '%s'", appsv1.RollingUpdateStatefulSetStrategyType))}
		}
	case appsv1.RollingUpdateStatefulSetStrategyType:
		if s.RollingUpdate != nil {
			return validateRollingUpdateStatefulSet(s.RollingUpdate, fldPath.Child("rollingUpdate"))
		}
	default:
		return field.ErrorList{field.Invalid(fldPath, *s,
			fmt.Sprintf("must be '%s' or '%s'", appsv1.RollingUpdateStatefulSetStrategyType, appsv1.OnDeleteStatefulSetStrategyType))}
	}
	return nil
}

func validateRollingUpdateStatefulSet(ru *appsv1.RollingUpdateStatefulSetStrategy, fldPath *field.Path) field.ErrorList {
	errs := apivalidation.ValidateNonnegativeField(int64(int32OrZero(ru.Partition)), fldPath.Child("partition"))
	if ru.MaxUnavailable != nil {
		p := fldPath.Child("maxUnavailable")
		errs = append(errs, validatePositiveIntOrPercent(*ru.MaxUnavailable, p)...)
		if intOrPercentValue(*ru.MaxUnavailable) == 0 {
			errs = append(errs, field.Invalid(p, *ru.MaxUnavailable, "cannot be 0"))
		}
		errs = append(errs, isNotMoreThan100Percent(*ru.MaxUnavailable, p)...)
	}
	return errs
}

func validateStatefulSetStatusUpdate(sts, old *appsv1.StatefulSet) field.ErrorList {
	errs := validateObjectMetaUpdate(&sts.ObjectMeta, &old.ObjectMeta, metaPath)
	p := field.NewPath("status")
	st := sts.Status
	errs = append(errs, nonNegative(p, n32("replicas", st.Replicas), n32("readyReplicas", st.ReadyReplicas), n32("currentReplicas", st.CurrentReplicas),
		n32("updatedReplicas", st.UpdatedReplicas), n32("availableReplicas", st.AvailableReplicas),
		n64("observedGeneration", st.ObservedGeneration))...)
	msg := "cannot be greater than status.replicas"
	for _, f := range []struct {
		name string
		v    int32
	}{{"readyReplicas", st.ReadyReplicas}, {"currentReplicas", st.CurrentReplicas},
		{"updatedReplicas", st.UpdatedReplicas}, {"availableReplicas", st.AvailableReplicas}} {
		if f.v > st.Replicas {
			errs = append(errs, field.Invalid(p.Child(f.name), f.v, msg))
		}
	}
	if st.AvailableReplicas > st.ReadyReplicas {
		errs = append(errs, field.Invalid(p.Child("availableReplicas"), st.AvailableReplicas, "cannot be greater than status.readyReplicas"))
	}
	return append(errs, validateCollisionCount(st.CollisionCount, old.Status.CollisionCount, p.Child("collisionCount"))...)
}

// count is one named number of a spec or status, for nonNegative; an
// unset optional one is not checked.
type count struct {
	name string
	v    int64
	set  bool
}

func n32(name string, v int32) count { return count{name, int64(v), true} }

func n64(name string, v int64) count { return count{name, v, true} }

func opt32(name string, v *int32) count {
	if v == nil {
		return count{name: name}
	}
	return n32(name, *v)
}

// nonNegative is ValidateNonnegativeField of each set count, under p.
func nonNegative(p *field.Path, counts ...count) field.ErrorList {
	var errs field.ErrorList
	for _, c := range counts {
		if c.set {
			errs = append(errs, apivalidation.ValidateNonnegativeField(c.v, p.Child(c.name))...)
		}
	}
	return errs
}
