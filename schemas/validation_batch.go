package schemas

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// This file ports pkg/apis/batch/validation for batch/v1 Jobs and
// CronJobs, with the options kube's job strategy passes (prefixed labels
// required, scheduling directives mutable while a job is suspended and has
// not started).

const (
	maxParallelismForIndexedJob             = 100_000
	maxFailedIndexesForIndexedJob           = 100_000
	completionsSoftLimit                    = 100_000
	parallelismLimitForHighCompletions      = 10_000
	maxFailedIndexesLimitForHighCompletions = 10_000
	maxPodFailurePolicyRules                = 20
	maxPodFailurePolicyOnExitCodesValues    = 255
	maxPodFailurePolicyOnPodConditions      = 20
	maxManagedByLength                      = 63
	maxSuccessPolicySucceededIndexes        = 64 * 1024
	maxSuccessPolicyRules                   = 20
)

// The supported values, sorted as kube's sets.List lists them in errors.
var (
	podFailurePolicyActions   = []string{string(batchv1.PodFailurePolicyActionCount), string(batchv1.PodFailurePolicyActionFailIndex), string(batchv1.PodFailurePolicyActionFailJob), string(batchv1.PodFailurePolicyActionIgnore)}
	podFailurePolicyOperators = []string{string(batchv1.PodFailurePolicyOnExitCodesOpIn), string(batchv1.PodFailurePolicyOnExitCodesOpNotIn)}
	podConditionStatuses      = []string{string(corev1.ConditionFalse), string(corev1.ConditionTrue), string(corev1.ConditionUnknown)}
	podReplacementPolicies    = []string{string(batchv1.Failed), string(batchv1.TerminatingOrFailed)}
)

// Jobs.

// The labels kube's job strategy generated before the batch.kubernetes.io/
// prefixed ones, which it still sets and checks.
const (
	legacyJobNameLabel       = "job-name"
	legacyControllerUIDLabel = "controller-uid"
)

// jobOptions are the JobValidationOptions kube's strategy uses.
type jobOptions struct {
	requirePrefixedLabels      bool
	allowInvalidLabelValue     bool
	mutableSchedulingDirective bool
}

func validateJob(j *batchv1.Job) field.ErrorList {
	return validateJobWith(j, jobOptions{requirePrefixedLabels: true})
}

func validateJobWith(j *batchv1.Job, opts jobOptions) field.ErrorList {
	errs := validateObjectMeta(&j.ObjectMeta, true, apivalidation.NameIsDNSSubdomain, metaPath)
	errs = append(errs, validateGeneratedSelector(j, opts.requirePrefixedLabels)...)
	errs = append(errs, validateJobSpec(&j.Spec, opts, field.NewPath("spec"))...)
	if s := j.Spec; s.CompletionMode != nil && *s.CompletionMode == batchv1.IndexedCompletion && s.Completions != nil && *s.Completions > 0 {
		// Pods of an Indexed Job have the hostname NAME-INDEX.
		hostname := fmt.Sprintf("%s-%d", j.Name, *s.Completions-1)
		if len(validation.IsDNS1123Label(hostname)) > 0 {
			errs = append(errs, field.Invalid(metaPath.Child("name"), j.Name, "will not able to create pod with invalid DNS label: "+hostname))
		}
	}
	return errs
}

// validateJobUpdate is kube's strategy ValidateUpdate: the job is validated
// again with the options its old version allows, then the update rules.
func validateJobUpdate(j, old *batchv1.Job) field.ErrorList {
	_, hadName := old.Spec.Template.Labels[batchv1.JobNameLabel]
	_, hadUID := old.Spec.Template.Labels[batchv1.ControllerUidLabel]
	opts := jobOptions{
		requirePrefixedLabels:      hadName && hadUID,
		allowInvalidLabelValue:     metav1validation.LabelSelectorHasInvalidLabelValue(old.Spec.Selector),
		mutableSchedulingDirective: boolOrFalse(old.Spec.Suspend) && old.Status.StartTime == nil,
	}
	errs := validateJobWith(j, opts)
	errs = append(errs, validateObjectMetaUpdate(&j.ObjectMeta, &old.ObjectMeta, metaPath)...)
	errs = append(errs, validateJobSpec(&j.Spec, opts, field.NewPath("spec"))...)
	return append(errs, validateJobSpecUpdate(&j.Spec, &old.Spec, opts, field.NewPath("spec"))...)
}

// validateGeneratedSelector: unless the selector is manual, the template
// carries the labels PrepareForCreate generated and the selector selects
// them.
func validateGeneratedSelector(j *batchv1.Job, requirePrefixed bool) field.ErrorList {
	if boolOrFalse(j.Spec.ManualSelector) || j.Spec.Selector == nil {
		return nil
	}
	var errs field.ErrorList
	if j.UID == "" {
		errs = append(errs, field.Required(metaPath.Child("uid"), ""))
	}
	tPath := field.NewPath("spec", "template", "metadata")
	want := map[string]string{legacyControllerUIDLabel: string(j.UID), legacyJobNameLabel: j.Name}
	keys := []string{legacyControllerUIDLabel, legacyJobNameLabel}
	if requirePrefixed {
		want[batchv1.ControllerUidLabel], want[batchv1.JobNameLabel] = string(j.UID), j.Name
		keys = append(keys, batchv1.ControllerUidLabel, batchv1.JobNameLabel)
	}
	for _, k := range keys {
		errs = append(errs, validateHasLabel(j.Spec.Template.Labels, tPath, k, want[k])...)
	}
	if selector, err := metav1.LabelSelectorAsSelector(j.Spec.Selector); err == nil && !selector.Matches(labels.Set(want)) {
		errs = append(errs, field.Invalid(field.NewPath("spec", "selector"), j.Spec.Selector, "`selector` not auto-generated"))
	}
	return errs
}

// validateHasLabel is core's ValidateHasLabel.
func validateHasLabel(l map[string]string, fldPath *field.Path, key, want string) field.ErrorList {
	got, ok := l[key]
	if !ok {
		return field.ErrorList{field.Required(fldPath.Child("labels").Key(key), want)}
	}
	if got != want {
		return field.ErrorList{field.Invalid(fldPath.Child("labels").Key(key), l, "must be '"+want+"'")}
	}
	return nil
}

// validateJobSpec is ValidateJobSpec: the common spec checks and a
// selector that matches the template.
func validateJobSpec(s *batchv1.JobSpec, opts jobOptions, fldPath *field.Path) field.ErrorList {
	errs := validateJobSpecCommon(s, fldPath)
	selPath := fldPath.Child("selector")
	if s.Selector == nil {
		errs = append(errs, field.Required(selPath, ""))
	} else {
		errs = append(errs, metav1validation.ValidateLabelSelector(s.Selector, metav1validation.LabelSelectorValidationOptions{AllowInvalidLabelValueInSelector: opts.allowInvalidLabelValue}, selPath)...)
	}
	if selector, err := metav1.LabelSelectorAsSelector(s.Selector); err == nil && !selector.Matches(labels.Set(s.Template.Labels)) {
		errs = append(errs, field.Invalid(fldPath.Child("template", "metadata", "labels"), s.Template.Labels, "`selector` does not match template `labels`"))
	}
	return errs
}

// validateJobSpecCommon is validateJobSpec, shared by jobs and the job
// templates of cron jobs.
func validateJobSpecCommon(s *batchv1.JobSpec, fldPath *field.Path) field.ErrorList {
	errs := nonNegative(fldPath, opt32("parallelism", s.Parallelism), opt32("completions", s.Completions), opt32("backoffLimit", s.BackoffLimit),
		opt32("ttlSecondsAfterFinished", s.TTLSecondsAfterFinished), opt32("backoffLimitPerIndex", s.BackoffLimitPerIndex),
		opt32("maxFailedIndexes", s.MaxFailedIndexes))
	if s.ActiveDeadlineSeconds != nil {
		errs = append(errs, apivalidation.ValidateNonnegativeField(*s.ActiveDeadlineSeconds, fldPath.Child("activeDeadlineSeconds"))...)
	}
	if s.MaxFailedIndexes != nil && s.BackoffLimitPerIndex == nil {
		errs = append(errs, field.Required(fldPath.Child("backoffLimitPerIndex"), "when maxFailedIndexes is specified"))
	}
	if s.ManagedBy != nil {
		errs = append(errs, validation.IsDomainPrefixedPath(fldPath.Child("managedBy"), *s.ManagedBy)...)
		if len(*s.ManagedBy) > maxManagedByLength {
			errs = append(errs, field.TooLong(fldPath.Child("managedBy"), "", maxManagedByLength))
		}
	}
	errs = append(errs, validateCompletionMode(s, fldPath)...)
	if s.PodFailurePolicy != nil {
		errs = append(errs, validatePodFailurePolicy(s, fldPath.Child("podFailurePolicy"))...)
	}
	if s.SuccessPolicy != nil {
		if !isIndexed(s) {
			errs = append(errs, field.Invalid(fldPath.Child("successPolicy"), *s.SuccessPolicy, "requires indexed completion mode"))
		} else {
			errs = append(errs, validateSuccessPolicy(s, fldPath.Child("successPolicy"))...)
		}
	}
	if p := s.PodReplacementPolicy; p != nil {
		pPath := fldPath.Child("podReplacementPolicy")
		if s.PodFailurePolicy != nil {
			if *p != batchv1.Failed {
				errs = append(errs, field.NotSupported(pPath, *p, []string{string(batchv1.Failed)}))
			}
		} else if !sets.New(podReplacementPolicies...).Has(string(*p)) {
			errs = append(errs, field.NotSupported(pPath, *p, podReplacementPolicies))
		}
	}
	tPath := fldPath.Child("template")
	errs = append(errs, validatePodTemplateSpec(&s.Template, tPath)...)
	rp := s.Template.Spec.RestartPolicy
	switch {
	case rp == corev1.RestartPolicyAlways || rp == "":
		errs = append(errs, field.Required(tPath.Child("spec", "restartPolicy"),
			fmt.Sprintf("valid values: %q, %q", corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever)))
	case rp != corev1.RestartPolicyOnFailure && rp != corev1.RestartPolicyNever:
		errs = append(errs, field.NotSupported(tPath.Child("spec", "restartPolicy"), rp, []string{string(corev1.RestartPolicyOnFailure), string(corev1.RestartPolicyNever)}))
	case s.PodFailurePolicy != nil && rp != corev1.RestartPolicyNever:
		errs = append(errs, field.Invalid(tPath.Child("spec", "restartPolicy"), rp, fmt.Sprintf("only %q is supported when podFailurePolicy is specified", corev1.RestartPolicyNever)))
	}
	return errs
}

func isIndexed(s *batchv1.JobSpec) bool {
	return s.CompletionMode != nil && *s.CompletionMode == batchv1.IndexedCompletion
}

// validateCompletionMode checks the mode and the limits of Indexed Jobs
// and of backoffLimitPerIndex.
func validateCompletionMode(s *batchv1.JobSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if m := s.CompletionMode; m != nil && *m != batchv1.NonIndexedCompletion && *m != batchv1.IndexedCompletion {
		errs = append(errs, field.NotSupported(fldPath.Child("completionMode"), *m, []string{string(batchv1.NonIndexedCompletion), string(batchv1.IndexedCompletion)}))
	}
	if !isIndexed(s) {
		if s.BackoffLimitPerIndex != nil {
			errs = append(errs, field.Invalid(fldPath.Child("backoffLimitPerIndex"), *s.BackoffLimitPerIndex, "requires indexed completion mode"))
		}
		if s.MaxFailedIndexes != nil {
			errs = append(errs, field.Invalid(fldPath.Child("maxFailedIndexes"), *s.MaxFailedIndexes, "requires indexed completion mode"))
		}
		return errs
	}
	if s.Completions == nil {
		errs = append(errs, field.Required(fldPath.Child("completions"), "when completion mode is Indexed"))
	}
	if s.Parallelism != nil && *s.Parallelism > maxParallelismForIndexedJob {
		errs = append(errs, field.Invalid(fldPath.Child("parallelism"), *s.Parallelism, fmt.Sprintf("must be less than or equal to %d when completion mode is Indexed", maxParallelismForIndexedJob)))
	}
	if s.Completions != nil && s.MaxFailedIndexes != nil && *s.MaxFailedIndexes > *s.Completions {
		errs = append(errs, field.Invalid(fldPath.Child("maxFailedIndexes"), *s.MaxFailedIndexes, "must be less than or equal to completions"))
	}
	if s.MaxFailedIndexes != nil && *s.MaxFailedIndexes > maxFailedIndexesForIndexedJob {
		errs = append(errs, field.Invalid(fldPath.Child("maxFailedIndexes"), *s.MaxFailedIndexes, fmt.Sprintf("must be less than or equal to %d", maxFailedIndexesForIndexedJob)))
	}
	if s.Completions != nil && *s.Completions > completionsSoftLimit && s.BackoffLimitPerIndex != nil {
		if s.MaxFailedIndexes == nil {
			errs = append(errs, field.Required(fldPath.Child("maxFailedIndexes"), fmt.Sprintf("must be specified when completions is above %d", completionsSoftLimit)))
		}
		if s.Parallelism != nil && *s.Parallelism > parallelismLimitForHighCompletions {
			errs = append(errs, field.Invalid(fldPath.Child("parallelism"), *s.Parallelism, fmt.Sprintf("must be less than or equal to %d when completions are above %d and used with backoff limit per index", parallelismLimitForHighCompletions, completionsSoftLimit)))
		}
		if s.MaxFailedIndexes != nil && *s.MaxFailedIndexes > maxFailedIndexesLimitForHighCompletions {
			errs = append(errs, field.Invalid(fldPath.Child("maxFailedIndexes"), *s.MaxFailedIndexes, fmt.Sprintf("must be less than or equal to %d when completions are above %d and used with backoff limit per index", maxFailedIndexesLimitForHighCompletions, completionsSoftLimit)))
		}
	}
	return errs
}

func validatePodFailurePolicy(s *batchv1.JobSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	rulesPath := fldPath.Child("rules")
	rules := s.PodFailurePolicy.Rules
	if len(rules) > maxPodFailurePolicyRules {
		errs = append(errs, field.TooMany(rulesPath, len(rules), maxPodFailurePolicyRules))
	}
	names := sets.New[string]()
	for _, c := range append(append([]corev1.Container(nil), s.Template.Spec.Containers...), s.Template.Spec.InitContainers...) {
		names.Insert(c.Name)
	}
	for i := range rules {
		errs = append(errs, validatePodFailurePolicyRule(s, &rules[i], rulesPath.Index(i), names)...)
	}
	return errs
}

func validatePodFailurePolicyRule(s *batchv1.JobSpec, r *batchv1.PodFailurePolicyRule, p *field.Path, containers sets.Set[string]) field.ErrorList {
	var errs field.ErrorList
	actionPath := p.Child("action")
	switch {
	case r.Action == "":
		errs = append(errs, field.Required(actionPath, fmt.Sprintf("valid values: %q", podFailurePolicyActions)))
	case r.Action == batchv1.PodFailurePolicyActionFailIndex:
		if s.BackoffLimitPerIndex == nil {
			errs = append(errs, field.Invalid(actionPath, r.Action, "requires the backoffLimitPerIndex to be set"))
		}
	case !sets.New(podFailurePolicyActions...).Has(string(r.Action)):
		errs = append(errs, field.NotSupported(actionPath, r.Action, podFailurePolicyActions))
	}
	if r.OnExitCodes != nil {
		errs = append(errs, validateOnExitCodes(r.OnExitCodes, p.Child("onExitCodes"), containers)...)
	}
	if len(r.OnPodConditions) > 0 {
		cPath := p.Child("onPodConditions")
		if len(r.OnPodConditions) > maxPodFailurePolicyOnPodConditions {
			errs = append(errs, field.TooMany(cPath, len(r.OnPodConditions), maxPodFailurePolicyOnPodConditions))
		}
		for j, c := range r.OnPodConditions {
			errs = append(errs, validateQualifiedName(string(c.Type), cPath.Index(j).Child("type"))...)
			statusPath := cPath.Index(j).Child("status")
			if c.Status == "" {
				errs = append(errs, field.Required(statusPath, fmt.Sprintf("valid values: %q", podConditionStatuses)))
			} else if !sets.New(podConditionStatuses...).Has(string(c.Status)) {
				errs = append(errs, field.NotSupported(statusPath, c.Status, podConditionStatuses))
			}
		}
	}
	if r.OnExitCodes != nil && len(r.OnPodConditions) > 0 {
		errs = append(errs, field.Invalid(p, field.OmitValueType{}, "specifying both OnExitCodes and OnPodConditions is not supported"))
	}
	if r.OnExitCodes == nil && len(r.OnPodConditions) == 0 {
		errs = append(errs, field.Invalid(p, field.OmitValueType{}, "specifying one of OnExitCodes and OnPodConditions is required"))
	}
	return errs
}

func validateOnExitCodes(r *batchv1.PodFailurePolicyOnExitCodesRequirement, p *field.Path, containers sets.Set[string]) field.ErrorList {
	var errs field.ErrorList
	opPath := p.Child("operator")
	if r.Operator == "" {
		errs = append(errs, field.Required(opPath, fmt.Sprintf("valid values: %q", podFailurePolicyOperators)))
	} else if !sets.New(podFailurePolicyOperators...).Has(string(r.Operator)) {
		errs = append(errs, field.NotSupported(opPath, r.Operator, podFailurePolicyOperators))
	}
	if r.ContainerName != nil && !containers.Has(*r.ContainerName) {
		errs = append(errs, field.Invalid(p.Child("containerName"), *r.ContainerName, "must be one of the container or initContainer names in the pod template"))
	}
	valuesPath := p.Child("values")
	if len(r.Values) == 0 {
		errs = append(errs, field.Invalid(valuesPath, r.Values, "at least one value is required"))
	} else if len(r.Values) > maxPodFailurePolicyOnExitCodesValues {
		errs = append(errs, field.TooMany(valuesPath, len(r.Values), maxPodFailurePolicyOnExitCodesValues))
	}
	ordered := true
	seen := sets.New[int32]()
	for j, v := range r.Values {
		if r.Operator == batchv1.PodFailurePolicyOnExitCodesOpIn && v == 0 {
			errs = append(errs, field.Invalid(valuesPath.Index(j), v, "must not be 0 for the In operator"))
		}
		if seen.Has(v) {
			errs = append(errs, field.Duplicate(valuesPath.Index(j), v))
		}
		seen.Insert(v)
		if j > 0 && r.Values[j-1] > v {
			ordered = false
		}
	}
	if !ordered {
		errs = append(errs, field.Invalid(valuesPath, r.Values, "must be ordered"))
	}
	return errs
}

func validateSuccessPolicy(s *batchv1.JobSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	rulesPath := fldPath.Child("rules")
	rules := s.SuccessPolicy.Rules
	if len(rules) == 0 {
		errs = append(errs, field.Required(rulesPath, "at least one rules must be specified when the successPolicy is specified"))
	}
	if len(rules) > maxSuccessPolicyRules {
		errs = append(errs, field.TooMany(rulesPath, len(rules), maxSuccessPolicyRules))
	}
	completions := int32OrZero(s.Completions)
	for i, r := range rules {
		p := rulesPath.Index(i)
		if r.SucceededCount == nil && r.SucceededIndexes == nil {
			errs = append(errs, field.Required(p, "at least one of succeededCount or succeededIndexes must be specified"))
		}
		var total int32
		if r.SucceededIndexes != nil {
			ip := p.Child("succeededIndexes")
			if len(*r.SucceededIndexes) > maxSuccessPolicySucceededIndexes {
				errs = append(errs, field.TooLong(ip, "", maxSuccessPolicySucceededIndexes))
			}
			var err error
			if total, err = validateIndexesFormat(*r.SucceededIndexes, completions); err != nil {
				errs = append(errs, field.Invalid(ip, *r.SucceededIndexes, "error parsing succeededIndexes: "+err.Error()))
			}
		}
		if r.SucceededCount != nil {
			cp := p.Child("succeededCount")
			errs = append(errs, apivalidation.ValidateNonnegativeField(int64(*r.SucceededCount), cp)...)
			if *r.SucceededCount > completions {
				errs = append(errs, field.Invalid(cp, *r.SucceededCount, fmt.Sprintf("must be less than or equal to %d (the number of specified completions)", completions)))
			}
			if r.SucceededIndexes != nil && *r.SucceededCount > total {
				errs = append(errs, field.Invalid(cp, *r.SucceededCount, fmt.Sprintf("must be less than or equal to %d (the number of indexes in the specified succeededIndexes field)", total)))
			}
		}
	}
	return errs
}

// validateIndexesFormat is kube's: "1,3-5,7", increasing, each index below
// completions. It returns how many indexes the list holds.
func validateIndexesFormat(indexes string, completions int32) (int32, error) {
	if indexes == "" {
		return 0, nil
	}
	var last *int32
	var total int32
	for _, interval := range strings.Split(indexes, ",") {
		x, y, err := parseIndexInterval(interval, completions)
		if err != nil {
			return 0, err
		}
		if last != nil && *last >= x {
			return 0, fmt.Errorf("non-increasing order, previous: %d, current: %d", *last, x)
		}
		total += y - x + 1
		last = &y
	}
	return total, nil
}

func parseIndexInterval(interval string, completions int32) (int32, int32, error) {
	limits := strings.Split(interval, "-")
	if len(limits) > 2 {
		return 0, 0, fmt.Errorf("the fragment %q violates the requirement that an index interval can have at most two parts separated by '-'", interval)
	}
	bound := func(s string) (int32, error) {
		n, err := strconv.Atoi(s)
		if err != nil {
			return 0, fmt.Errorf("cannot convert string to integer for index: %q", s)
		}
		if n >= int(completions) {
			return 0, fmt.Errorf("too large index: %q", s)
		}
		return int32(n), nil
	}
	x, err := bound(limits[0])
	if err != nil || len(limits) == 1 {
		return x, x, err
	}
	y, err := bound(limits[1])
	if err != nil {
		return 0, 0, err
	}
	if x >= y {
		return 0, 0, fmt.Errorf("non-increasing order, previous: %d, current: %d", x, y)
	}
	return x, y, nil
}

// validateJobSpecUpdate is ValidateJobSpecUpdate: what a job may not
// change once created.
func validateJobSpecUpdate(s, old *batchv1.JobSpec, opts jobOptions, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	// Completions of an Indexed Job may change, together with parallelism.
	if !isIndexed(s) {
		errs = append(errs, apivalidation.ValidateImmutableField(s.Completions, old.Completions, fldPath.Child("completions"))...)
	} else if !apiequality.Semantic.DeepEqual(s.Completions, old.Completions) && s.Completions != nil && *s.Completions != int32OrZero(s.Parallelism) {
		errs = append(errs, field.Invalid(fldPath.Child("completions"), s.Completions, "can only be modified in tandem with spec.parallelism"))
	}
	errs = append(errs, apivalidation.ValidateImmutableField(s.Selector, old.Selector, fldPath.Child("selector"))...)
	errs = append(errs, validateJobTemplateUpdate(s, old, opts, fldPath)...)
	for _, f := range []struct {
		name     string
		new, old any
	}{{"completionMode", s.CompletionMode, old.CompletionMode}, {"podFailurePolicy", s.PodFailurePolicy, old.PodFailurePolicy},
		{"backoffLimitPerIndex", s.BackoffLimitPerIndex, old.BackoffLimitPerIndex}, {"managedBy", s.ManagedBy, old.ManagedBy},
		{"successPolicy", s.SuccessPolicy, old.SuccessPolicy}} {
		errs = append(errs, apivalidation.ValidateImmutableField(f.new, f.old, fldPath.Child(f.name))...)
	}
	return errs
}

// validateJobTemplateUpdate: the template is immutable, except that a
// suspended job that never started may change its scheduling directives
// (node affinity, node selector, tolerations, scheduling gates) and its
// template's labels and annotations.
func validateJobTemplateUpdate(s, old *batchv1.JobSpec, opts jobOptions, fldPath *field.Path) field.ErrorList {
	t, oldT := &s.Template, &old.Template
	if opts.mutableSchedulingDirective {
		oldT = old.Template.DeepCopy()
		switch {
		case t.Spec.Affinity == nil && oldT.Spec.Affinity != nil:
			oldT.Spec.Affinity.NodeAffinity = nil
			if apiequality.Semantic.DeepEqual(*oldT.Spec.Affinity, corev1.Affinity{}) {
				oldT.Spec.Affinity = nil
			}
		case t.Spec.Affinity != nil && oldT.Spec.Affinity == nil:
			oldT.Spec.Affinity = &corev1.Affinity{NodeAffinity: t.Spec.Affinity.NodeAffinity}
		case t.Spec.Affinity != nil && oldT.Spec.Affinity != nil:
			oldT.Spec.Affinity.NodeAffinity = t.Spec.Affinity.NodeAffinity
		}
		oldT.Spec.NodeSelector = t.Spec.NodeSelector
		oldT.Spec.Tolerations = t.Spec.Tolerations
		oldT.Annotations = t.Annotations
		oldT.Labels = t.Labels
		oldT.Spec.SchedulingGates = t.Spec.SchedulingGates
	}
	return apivalidation.ValidateImmutableField(t, oldT, fldPath.Child("template"))
}

// jobCondition reports whether the job has condition t with status True.
func jobCondition(st *batchv1.JobStatus, t batchv1.JobConditionType) bool {
	for _, c := range st.Conditions {
		if c.Type == t && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// Cron jobs.

// validTimeZoneCharacters is kube's check of each part of an IANA name.
var validTimeZoneCharacters = regexp.MustCompile(`^[A-Za-z\.\-_0-9+]{1,14}$`)

// validateCronJob is ValidateCronJobCreate: the name leaves room for the
// 11-character suffix of the jobs it creates.
func validateCronJob(cj *batchv1.CronJob) field.ErrorList {
	errs := validateObjectMeta(&cj.ObjectMeta, true, apivalidation.NameIsDNSSubdomain, metaPath)
	errs = append(errs, validateCronJobSpec(&cj.Spec, nil, field.NewPath("spec"))...)
	if limit := validation.DNS1035LabelMaxLength - 11; len(cj.Name) > limit {
		errs = append(errs, field.Invalid(metaPath.Child("name"), cj.Name, validation.MaxLenError(limit)))
	}
	return errs
}

func validateCronJobUpdate(cj, old *batchv1.CronJob) field.ErrorList {
	errs := validateObjectMetaUpdate(&cj.ObjectMeta, &old.ObjectMeta, metaPath)
	return append(errs, validateCronJobSpec(&cj.Spec, &old.Spec, field.NewPath("spec"))...)
}

func validateCronJobSpec(s, old *batchv1.CronJobSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s.Schedule == "" {
		errs = append(errs, field.Required(fldPath.Child("schedule"), ""))
	} else {
		// A stored schedule with TZ= in it may keep it.
		allowTZ := old != nil && strings.Contains(old.Schedule, "TZ")
		errs = append(errs, validateSchedule(s.Schedule, allowTZ, s.TimeZone, fldPath.Child("schedule"))...)
	}
	if s.StartingDeadlineSeconds != nil {
		errs = append(errs, apivalidation.ValidateNonnegativeField(*s.StartingDeadlineSeconds, fldPath.Child("startingDeadlineSeconds"))...)
	}
	if old == nil || !apiequality.Semantic.DeepEqual(old.TimeZone, s.TimeZone) {
		errs = append(errs, validateTimeZone(s.TimeZone, fldPath.Child("timeZone"))...)
	}
	cp := fldPath.Child("concurrencyPolicy")
	switch s.ConcurrencyPolicy {
	case batchv1.AllowConcurrent, batchv1.ForbidConcurrent, batchv1.ReplaceConcurrent:
	case "":
		errs = append(errs, field.Required(cp, ""))
	default:
		errs = append(errs, field.NotSupported(cp, s.ConcurrencyPolicy, []string{string(batchv1.AllowConcurrent), string(batchv1.ForbidConcurrent), string(batchv1.ReplaceConcurrent)}))
	}
	errs = append(errs, validateJobTemplateSpec(&s.JobTemplate, fldPath.Child("jobTemplate"))...)
	return append(errs, nonNegative(fldPath, opt32("successfulJobsHistoryLimit", s.SuccessfulJobsHistoryLimit),
		opt32("failedJobsHistoryLimit", s.FailedJobsHistoryLimit))...)
}

// validateSchedule parses the schedule as kube's cron job controller does
// (robfig/cron's standard five fields and descriptors like @hourly).
func validateSchedule(schedule string, allowTZ bool, timeZone *string, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if _, err := parseCronSchedule(schedule); err != nil {
		errs = append(errs, field.Invalid(fldPath, schedule, err.Error()))
	}
	switch {
	case allowTZ && strings.Contains(schedule, "TZ") && timeZone != nil:
		errs = append(errs, field.Invalid(fldPath, schedule, "cannot use both timeZone field and TZ or CRON_TZ in schedule"))
	case !allowTZ && strings.Contains(schedule, "TZ"):
		errs = append(errs, field.Invalid(fldPath, schedule, "cannot use TZ or CRON_TZ in schedule, use timeZone field instead"))
	}
	return errs
}

// parseCronSchedule is ParseCronScheduleWithPanicRecovery: robfig/cron
// panics on some malformed input (an empty TZ=), which is an error here.
func parseCronSchedule(schedule string) (s cron.Schedule, err error) {
	defer func() {
		if r := recover(); r != nil {
			s, err = nil, fmt.Errorf("invalid schedule %s: %v", schedule, r)
		}
	}()
	return cron.ParseStandard(schedule)
}

func validateTimeZone(tz *string, fldPath *field.Path) field.ErrorList {
	if tz == nil {
		return nil
	}
	if *tz == "" {
		return field.ErrorList{field.Invalid(fldPath, tz, "timeZone must be nil or non-empty string")}
	}
	for _, part := range strings.Split(*tz, "/") {
		if part == "." || part == ".." || strings.HasPrefix(part, "-") || !validTimeZoneCharacters.MatchString(part) {
			return field.ErrorList{field.Invalid(fldPath, tz, "unknown time zone "+*tz)}
		}
	}
	var errs field.ErrorList
	if strings.EqualFold(*tz, "Local") {
		errs = append(errs, field.Invalid(fldPath, tz, "timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones"))
	}
	if _, err := time.LoadLocation(*tz); err != nil {
		errs = append(errs, field.Invalid(fldPath, tz, err.Error()))
	}
	return errs
}

// validateJobTemplateSpec: a cron job's job template gets a generated
// selector in every job made from it, so it may not carry one.
func validateJobTemplateSpec(t *batchv1.JobTemplateSpec, fldPath *field.Path) field.ErrorList {
	specPath := fldPath.Child("spec")
	errs := validateJobSpecCommon(&t.Spec, specPath)
	if t.Spec.Selector != nil {
		errs = append(errs, field.Invalid(specPath.Child("selector"), t.Spec.Selector, "`selector` will be auto-generated"))
	}
	if boolOrFalse(t.Spec.ManualSelector) {
		errs = append(errs, field.NotSupported(specPath.Child("manualSelector"), t.Spec.ManualSelector, []string{"nil", "false"}))
	}
	return errs
}

func validateCronJobStatusUpdate(cj, old *batchv1.CronJob) field.ErrorList {
	return validateObjectMetaUpdate(&cj.ObjectMeta, &old.ObjectMeta, metaPath)
}

func boolOrFalse(b *bool) bool { return b != nil && *b }

func uidStrings(uids []types.UID) []string {
	out := make([]string, len(uids))
	for i, u := range uids {
		out[i] = string(u)
	}
	return out
}
