package schemas

import (
	"fmt"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// This file ports ValidateJobUpdateStatus with the options kube's job
// status strategy passes while JobManagedBy is on (its default since
// 1.32): a rule is checked only when a field it reads changed, so that a
// status update unrelated to a field gone stale (completedIndexes above a
// completions just scaled down) still passes, and the terminal
// conditions, the failed count and the completion time never go back.

// jobStatusRules are JobStatusValidationOptions: which rules apply.
type jobStatusRules struct {
	decreasingSucceeded, invalidCompletedIndexes, invalidFailedIndexes, completedIndexesNonIndexed  bool
	failedIndexesWithoutPerIndex, failedIndexesOverlap, failedWithoutFailureTarget                  bool
	completeWithoutSuccessCriteria, finishedWithActive, finishedWithoutStartTime                    bool
	finishedWithUncounted, startTimeUpdateUnsuspended, completionBeforeStart, notCompleteWithTime   bool
	completeWithoutTime, completeWithFailed, completeWithFailureTarget, moreReady, finishedWithTerm bool
}

// jobStatusRulesFor is getStatusValidationOptions.
func jobStatusRulesFor(j, old *batchv1.Job) jobStatusRules {
	st, ost := &j.Status, &old.Status
	changed := func(c batchv1.JobConditionType) bool { return jobCondition(st, c) != jobCondition(ost, c) }
	finishedChanged := jobFinished(st) != jobFinished(ost)
	completeChanged, failedChanged := changed(batchv1.JobComplete), changed(batchv1.JobFailed)
	completedIdx := st.CompletedIndexes != ost.CompletedIndexes
	failedIdx := !apiequality.Semantic.DeepEqual(st.FailedIndexes, ost.FailedIndexes)
	active := st.Active != ost.Active
	start := !apiequality.Semantic.DeepEqual(st.StartTime, ost.StartTime)
	completion := !apiequality.Semantic.DeepEqual(st.CompletionTime, ost.CompletionTime)
	return jobStatusRules{
		// Succeeded pods may go down for an Indexed Job scaled down.
		decreasingSucceeded:            !isIndexed(&j.Spec) || !apiequality.Semantic.DeepEqual(j.Spec.Completions, j.Spec.Parallelism),
		invalidCompletedIndexes:        completedIdx,
		invalidFailedIndexes:           failedIdx,
		completedIndexesNonIndexed:     completedIdx,
		failedIndexesWithoutPerIndex:   failedIdx,
		failedIndexesOverlap:           failedIdx || completedIdx,
		failedWithoutFailureTarget:     failedChanged || failedIdx,
		completeWithoutSuccessCriteria: completeChanged || changed(batchv1.JobSuccessCriteriaMet),
		finishedWithActive:             finishedChanged || active,
		finishedWithoutStartTime:       finishedChanged || start,
		finishedWithUncounted:          finishedChanged || !apiequality.Semantic.DeepEqual(st.UncountedTerminatedPods, ost.UncountedTerminatedPods),
		startTimeUpdateUnsuspended:     start,
		completionBeforeStart:          start || completion,
		notCompleteWithTime:            completeChanged || completion,
		completeWithoutTime:            completeChanged || completion,
		completeWithFailed:             completeChanged || failedChanged,
		completeWithFailureTarget:      completeChanged || changed(batchv1.JobFailureTarget),
		moreReady:                      !apiequality.Semantic.DeepEqual(st.Ready, ost.Ready) || active,
		finishedWithTerm:               finishedChanged || !apiequality.Semantic.DeepEqual(st.Terminating, ost.Terminating),
	}
}

func jobFinished(st *batchv1.JobStatus) bool {
	return jobCondition(st, batchv1.JobComplete) || jobCondition(st, batchv1.JobFailed)
}

func validateJobStatusUpdate(j, old *batchv1.Job) field.ErrorList {
	errs := validateObjectMetaUpdate(&j.ObjectMeta, &old.ObjectMeta, metaPath)
	rules := jobStatusRulesFor(j, old)
	errs = append(errs, validateJobStatus(j, rules)...)
	return append(errs, validateJobStatusTransitions(j, old, rules)...)
}

// validateJobStatus is validateJobStatus: the status on its own.
func validateJobStatus(j *batchv1.Job, r jobStatusRules) field.ErrorList {
	p := field.NewPath("status")
	st := &j.Status
	errs := nonNegative(p, n32("active", st.Active), n32("succeeded", st.Succeeded), n32("failed", st.Failed),
		opt32("ready", st.Ready), opt32("terminating", st.Terminating))
	errs = append(errs, validateUncountedTerminatedPods(st.UncountedTerminatedPods, p.Child("uncountedTerminatedPods"))...)
	cond := func(c batchv1.JobConditionType) bool { return jobCondition(st, c) }
	complete, failed, finished := cond(batchv1.JobComplete), cond(batchv1.JobFailed), jobFinished(st)
	successMet, failureTarget := cond(batchv1.JobSuccessCriteriaMet), cond(batchv1.JobFailureTarget)
	condPath := p.Child("conditions")
	invalidCond := func(msg string) { errs = append(errs, field.Invalid(condPath, field.OmitValueType{}, msg)) }
	if r.completeWithFailed && complete && failed {
		invalidCond("cannot set Complete=True and Failed=true conditions")
	}
	if r.completeWithFailureTarget && complete && failureTarget {
		invalidCond("cannot set Complete=True and FailureTarget=true conditions")
	}
	if r.notCompleteWithTime && st.CompletionTime != nil && !complete {
		errs = append(errs, field.Invalid(p.Child("completionTime"), st.CompletionTime, "cannot set completionTime when there is no Complete=True condition"))
	}
	if r.completeWithoutTime && st.CompletionTime == nil && complete {
		errs = append(errs, field.Required(p.Child("completionTime"), "completionTime is required for Complete jobs"))
	}
	if r.completionBeforeStart && st.StartTime != nil && st.CompletionTime != nil && st.CompletionTime.Before(st.StartTime) {
		errs = append(errs, field.Invalid(p.Child("completionTime"), st.CompletionTime, "must be equal to or after `startTime`"))
	}
	if r.failedWithoutFailureTarget && failed && !failureTarget {
		invalidCond("cannot set Failed=True condition without the FailureTarget=true condition")
	}
	if r.completeWithoutSuccessCriteria && complete && !successMet {
		invalidCond("cannot set Complete=True condition without the SuccessCriteriaMet=true condition")
	}
	if r.finishedWithActive && st.Active > 0 && finished {
		errs = append(errs, field.Invalid(p.Child("active"), st.Active, "active>0 is invalid for finished job"))
	}
	if r.finishedWithoutStartTime && st.StartTime == nil && finished {
		errs = append(errs, field.Required(p.Child("startTime"), "startTime is required for finished job"))
	}
	if u := st.UncountedTerminatedPods; r.finishedWithUncounted && finished && u != nil && len(u.Failed)+len(u.Succeeded) > 0 {
		errs = append(errs, field.Invalid(p.Child("uncountedTerminatedPods"), u, "must be empty for finished job"))
	}
	errs = append(errs, validateJobStatusIndexes(j, r)...)
	if t := st.Terminating; r.finishedWithTerm && t != nil && *t > 0 && finished {
		errs = append(errs, field.Invalid(p.Child("terminating"), st.Terminating, "terminating>0 is invalid for finished job"))
	}
	if r.moreReady && st.Ready != nil && *st.Ready > st.Active {
		errs = append(errs, field.Invalid(p.Child("ready"), *st.Ready, "cannot set more ready pods than active"))
	}
	if successMet && failed {
		invalidCond("cannot set SuccessCriteriaMet=True and Failed=true conditions")
	}
	if successMet && failureTarget {
		invalidCond("cannot set SuccessCriteriaMet=True and FailureTarget=true conditions")
	}
	if j.Spec.SuccessPolicy != nil && !successMet && complete {
		invalidCond("cannot set Complete=True for Job with SuccessPolicy unless SuccessCriteriaMet=True")
	}
	return errs
}

// validateJobStatusIndexes checks completedIndexes and failedIndexes.
func validateJobStatusIndexes(j *batchv1.Job, r jobStatusRules) field.ErrorList {
	var errs field.ErrorList
	p := field.NewPath("status")
	st, s := &j.Status, &j.Spec
	if r.invalidCompletedIndexes && s.Completions != nil {
		if _, err := validateIndexesFormat(st.CompletedIndexes, *s.Completions); err != nil {
			errs = append(errs, field.Invalid(p.Child("completedIndexes"), st.CompletedIndexes, "error parsing completedIndexes: "+err.Error()))
		}
	}
	if r.invalidFailedIndexes && s.Completions != nil && s.BackoffLimitPerIndex != nil && st.FailedIndexes != nil {
		if _, err := validateIndexesFormat(*st.FailedIndexes, *s.Completions); err != nil {
			errs = append(errs, field.Invalid(p.Child("failedIndexes"), st.FailedIndexes, "error parsing failedIndexes: "+err.Error()))
		}
	}
	if r.completedIndexesNonIndexed && st.CompletedIndexes != "" && !isIndexed(s) {
		errs = append(errs, field.Invalid(p.Child("completedIndexes"), st.CompletedIndexes, "cannot set non-empty completedIndexes when non-indexed completion mode"))
	}
	if r.failedIndexesWithoutPerIndex && s.BackoffLimitPerIndex == nil && st.FailedIndexes != nil {
		errs = append(errs, field.Invalid(p.Child("failedIndexes"), *st.FailedIndexes, "cannot set non-null failedIndexes when backoffLimitPerIndex is null"))
	}
	if r.failedIndexesOverlap && s.Completions != nil && st.FailedIndexes != nil {
		if i, ok := indexesOverlap(st.CompletedIndexes, *st.FailedIndexes, *s.Completions); ok {
			errs = append(errs, field.Invalid(p.Child("failedIndexes"), *st.FailedIndexes, fmt.Sprintf("failedIndexes and completedIndexes overlap at index: %d", i)))
		}
	}
	return errs
}

// indexesOverlap reports the first index both lists hold; intervals that
// do not parse are skipped (the format checks report them).
func indexesOverlap(completed, failed string, completions int32) (int32, bool) {
	if completed == "" || failed == "" {
		return 0, false
	}
	in := sets.New[int32]()
	for _, iv := range strings.Split(completed, ",") {
		if x, y, err := parseIndexInterval(iv, completions); err == nil {
			for i := x; i <= y; i++ {
				in.Insert(i)
			}
		}
	}
	for _, iv := range strings.Split(failed, ",") {
		if x, y, err := parseIndexInterval(iv, completions); err == nil {
			for i := x; i <= y; i++ {
				if in.Has(i) {
					return i, true
				}
			}
		}
	}
	return 0, false
}

// validateJobStatusTransitions is the rest of ValidateJobStatusUpdate:
// what the update may not undo.
func validateJobStatusTransitions(j, old *batchv1.Job, r jobStatusRules) field.ErrorList {
	var errs field.ErrorList
	p := field.NewPath("status")
	st, ost := &j.Status, &old.Status
	condPath := p.Child("conditions")
	for _, c := range []batchv1.JobConditionType{batchv1.JobFailed, batchv1.JobComplete, batchv1.JobFailureTarget} {
		if jobCondition(ost, c) && !jobCondition(st, c) {
			errs = append(errs, field.Invalid(condPath, field.OmitValueType{}, fmt.Sprintf("cannot disable the terminal %s=True condition", c)))
		}
	}
	if st.Failed < ost.Failed {
		errs = append(errs, field.Invalid(p.Child("failed"), st.Failed, "cannot decrease the failed counter"))
	}
	if r.decreasingSucceeded && st.Succeeded < ost.Succeeded {
		errs = append(errs, field.Invalid(p.Child("succeeded"), st.Succeeded, "cannot decrease the succeeded counter"))
	}
	if st.CompletionTime != nil && ost.CompletionTime != nil && !st.CompletionTime.Equal(ost.CompletionTime) {
		errs = append(errs, field.Invalid(p.Child("completionTime"), st.CompletionTime, "field is immutable"))
	}
	if r.startTimeUpdateUnsuspended && ost.StartTime != nil && !apiequality.Semantic.DeepEqual(ost.StartTime, st.StartTime) && !boolOrFalse(j.Spec.Suspend) {
		errs = append(errs, field.Required(p.Child("startTime"), "startTime cannot be removed for unsuspended job"))
	}
	metOld, metNew := jobCondition(ost, batchv1.JobSuccessCriteriaMet), jobCondition(st, batchv1.JobSuccessCriteriaMet)
	if metOld && !metNew {
		errs = append(errs, field.Invalid(condPath, field.OmitValueType{}, "cannot disable the SuccessCriteriaMet=True condition"))
	}
	if jobCondition(ost, batchv1.JobComplete) && !metOld && metNew {
		errs = append(errs, field.Invalid(condPath, field.OmitValueType{}, "cannot set SuccessCriteriaMet=True for Job already has Complete=true conditions"))
	}
	return errs
}

func validateUncountedTerminatedPods(u *batchv1.UncountedTerminatedPods, p *field.Path) field.ErrorList {
	if u == nil {
		return nil
	}
	var errs field.ErrorList
	seen := sets.New[string]()
	for _, part := range []struct {
		name string
		uids []string
	}{{"succeeded", uidStrings(u.Succeeded)}, {"failed", uidStrings(u.Failed)}} {
		for i, k := range part.uids {
			ip := p.Child(part.name).Index(i)
			switch {
			case k == "":
				errs = append(errs, field.Invalid(ip, k, "must not be empty"))
			case seen.Has(k):
				errs = append(errs, field.Duplicate(ip, k))
			default:
				seen.Insert(k)
			}
		}
	}
	return errs
}
