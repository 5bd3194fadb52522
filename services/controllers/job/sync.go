package job

import (
	"context"
	"fmt"
	"slices"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cairn-dev/cairn/events/consumer"
)

var _ consumer.Reconciler = (*Controller)(nil)

// syncJobCtx is what one round knows of a Job (kube's syncJobCtx).
type syncJobCtx struct {
	key                  string
	job                  *batchv1.Job
	pods                 []*corev1.Pod
	activePods           []*corev1.Pod
	succeeded, failed    int32
	ready                int32
	terminating          int32
	finishedCondition    *batchv1.JobCondition
	succeededIndexes     orderedIntervals
	prevSucceededIndexes orderedIntervals
	failedIndexes        *orderedIntervals
	uncounted            uncounted
	expectedRmFinalizers map[types.UID]struct{}
	newBackoffRecord     backoffRecord
	// podsWithDelayedDeletionPerIndex: see getPodsWithDelayedDeletionPerIndex.
	podsWithDelayedDeletionPerIndex map[int]*corev1.Pod
	// requeue is the soonest time the round asks to run again.
	requeue time.Duration
}

type uncounted struct{ succeeded, failed map[types.UID]struct{} }

func newUncounted(in *batchv1.UncountedTerminatedPods) uncounted {
	u := uncounted{succeeded: map[types.UID]struct{}{}, failed: map[types.UID]struct{}{}}
	for _, x := range in.Succeeded {
		u.succeeded[x] = struct{}{}
	}
	for _, x := range in.Failed {
		u.failed[x] = struct{}{}
	}
	return u
}

func (jc *syncJobCtx) requeueAfter(d time.Duration) {
	if d > 0 && (jc.requeue == 0 || d < jc.requeue) {
		jc.requeue = d
	}
}

// Reconcile runs one round of kube's syncJob for the Job req.Key. It is
// called by the controller's workers; the cause in ctx is carried by every
// write. An error means retry with back-off.
func (c *Controller) Reconcile(ctx context.Context, req consumer.Request) (consumer.Result, error) {
	ns, name := req.NamespaceName()
	shared, ok := c.jobs.Get(ns, name)
	if !ok {
		c.expect.forget(req.Key)
		c.finalizers.forget(req.Key)
		c.backoff.remove(req.Key)
		c.written.Forget(req.Key)
		return consumer.Result{}, c.releaseOrphans(ctx, ns, name, "")
	}
	if !c.written.Seen(req.Key, shared.ResourceVersion) {
		// Its event queues the Job again; the requeue is for a lost one.
		return consumer.Result{RequeueAfter: time.Second}, nil
	}
	if shared.Spec.ManagedBy != nil && *shared.Spec.ManagedBy != batchv1.JobControllerName {
		return consumer.Result{}, nil
	}
	if isJobFinished(shared) {
		c.backoff.remove(req.Key)
		// Pods that finished after the Job did still carry the finalizer.
		return consumer.Result{}, c.releaseOrphans(ctx, ns, name, shared.UID)
	}
	job := shared.DeepCopy()
	if m := job.Spec.CompletionMode; m != nil && *m != batchv1.NonIndexedCompletion && *m != batchv1.IndexedCompletion {
		c.event(ctx, job, corev1.EventTypeWarning, "UnknownCompletionMode", "Skipped Job sync because completion mode is unknown")
		return consumer.Result{}, nil
	}
	jc, err := c.syncJob(ctx, req.Key, job)
	if err != nil {
		return consumer.Result{}, err
	}
	return consumer.Result{RequeueAfter: jc.requeue}, nil
}

func (c *Controller) syncJob(ctx context.Context, key string, job *batchv1.Job) (*syncJobCtx, error) {
	if job.Status.UncountedTerminatedPods == nil {
		job.Status.UncountedTerminatedPods = &batchv1.UncountedTerminatedPods{}
	}
	// Expectations first: a pod that arrives after the check is at least as
	// new as the expectations say.
	satisfied := c.expect.satisfied(key)
	pods := c.podsOf(job)
	jc := &syncJobCtx{
		key: key, job: job, pods: pods,
		uncounted:            newUncounted(job.Status.UncountedTerminatedPods),
		expectedRmFinalizers: c.finalizers.expected(key),
	}
	for _, p := range pods {
		if isActive(p) {
			jc.activePods = append(jc.activePods, p)
			if isPodReady(p) {
				jc.ready++
			}
		}
		if isTerminating(p) {
			jc.terminating++
		}
	}
	active := int32(len(jc.activePods))
	newSucceeded, newFailed := newFinishedPods(jc)
	jc.succeeded = job.Status.Succeeded + int32(len(newSucceeded)) + int32(len(jc.uncounted.succeeded))
	jc.failed = job.Status.Failed + int32(nonIgnoredFailedPodsCount(jc, newFailed)) + int32(len(jc.uncounted.failed))

	now := c.now()
	if job.Status.StartTime == nil && !jobSuspended(job) {
		t := metav1.NewTime(now)
		job.Status.StartTime = &t
	}
	jc.newBackoffRecord = c.backoff.newRecord(key, newSucceeded, newFailed)

	jc.finishedCondition = findTrueCondition(job, batchv1.JobSuccessCriteriaMet)
	if jc.finishedCondition == nil {
		if ft := findTrueCondition(job, batchv1.JobFailureTarget); ft != nil {
			jc.finishedCondition = newCondition(batchv1.JobFailed, corev1.ConditionTrue, ft.Reason, ft.Message, now)
		} else if msg := getFailJobMessage(job, pods); msg != nil {
			jc.finishedCondition = newCondition(batchv1.JobFailureTarget, corev1.ConditionTrue, batchv1.JobReasonPodFailurePolicy, *msg, now)
		}
	}
	if jc.finishedCondition == nil {
		switch {
		case jc.failed > *job.Spec.BackoffLimit || pastBackoffLimitOnFailure(job, pods):
			jc.finishedCondition = newFailureCondition(batchv1.JobReasonBackoffLimitExceeded, "Job has reached the specified backoff limit", now)
		case c.pastActiveDeadline(job):
			jc.finishedCondition = newFailureCondition(batchv1.JobReasonDeadlineExceeded, "Job was active longer than specified deadline", now)
		case job.Spec.ActiveDeadlineSeconds != nil && !jobSuspended(job):
			jc.requeueAfter(time.Duration(*job.Spec.ActiveDeadlineSeconds)*time.Second - now.Sub(job.Status.StartTime.Time))
		}
	}
	if isIndexedJob(job) {
		jc.prevSucceededIndexes, jc.succeededIndexes = calculateSucceededIndexes(c.log, job, pods)
		jc.succeeded = int32(jc.succeededIndexes.total())
		if hasBackoffLimitPerIndex(job) {
			jc.failedIndexes = calculateFailedIndexes(c.log, job, pods)
			if jc.finishedCondition == nil {
				failed := jc.failedIndexes.total()
				if job.Spec.MaxFailedIndexes != nil && failed > int(*job.Spec.MaxFailedIndexes) {
					jc.finishedCondition = newFailureCondition(batchv1.JobReasonMaxFailedIndexesExceeded, "Job has exceeded the specified maximal number of failed indexes", now)
				} else if failed > 0 && failed+jc.succeededIndexes.total() >= int(*job.Spec.Completions) {
					jc.finishedCondition = newFailureCondition(batchv1.JobReasonFailedIndexes, "Job has failed indexes", now)
				}
			}
			jc.podsWithDelayedDeletionPerIndex = getPodsWithDelayedDeletionPerIndex(c.log, jc)
		}
		if jc.finishedCondition == nil {
			if msg, met := matchSuccessPolicy(c.log, job.Spec.SuccessPolicy, *job.Spec.Completions, jc.succeededIndexes); met {
				jc.finishedCondition = newCondition(batchv1.JobSuccessCriteriaMet, corev1.ConditionTrue, batchv1.JobReasonSuccessPolicy, msg, now)
			}
		}
	}

	var manageErr error
	suspendChanged := false
	if jc.finishedCondition != nil {
		deletedReady, deleted, err := c.deleteActivePods(ctx, job, jc.activePods)
		if deleted != active || !satisfied {
			// Finalizers or pods the cache does not show yet may remain.
			jc.finishedCondition = nil
		}
		active -= deleted
		jc.terminating += deleted
		jc.ready -= deletedReady
		manageErr = err
	} else {
		manageCalled := false
		if satisfied && job.DeletionTimestamp == nil {
			active, manageErr = c.manageJob(ctx, jc)
			manageCalled = true
		}
		var complete bool
		if job.Spec.Completions == nil {
			// Done once any pod succeeded and the others finished.
			complete = jc.succeeded > 0 && active == 0
		} else {
			complete = jc.succeeded >= *job.Spec.Completions && active == 0
		}
		switch {
		case complete:
			jc.finishedCondition = newCondition(batchv1.JobSuccessCriteriaMet, corev1.ConditionTrue, batchv1.JobReasonCompletionsReached, "Reached expected number of succeeded pods", now)
		case manageCalled && jobSuspended(job):
			var updated bool
			job.Status.Conditions, updated = ensureJobConditionStatus(job.Status.Conditions, batchv1.JobSuspended, corev1.ConditionTrue, "JobSuspended", "Job suspended", now)
			if updated {
				suspendChanged = true
				c.event(ctx, job, corev1.EventTypeNormal, "Suspended", "Job suspended")
			}
		case manageCalled:
			var updated bool
			job.Status.Conditions, updated = ensureJobConditionStatus(job.Status.Conditions, batchv1.JobSuspended, corev1.ConditionFalse, "JobResumed", "Job resumed", now)
			if updated {
				suspendChanged = true
				c.event(ctx, job, corev1.EventTypeNormal, "Resumed", "Job resumed")
				// activeDeadlineSeconds counts the time continuously active.
				t := metav1.NewTime(now)
				job.Status.StartTime = &t
			}
		}
	}
	terminating := jc.terminating
	needsUpdate := suspendChanged || active != job.Status.Active || !ptrEqual(&jc.ready, job.Status.Ready) ||
		!ptrEqual(&terminating, job.Status.Terminating)
	job.Status.Active = active
	job.Status.Ready = &jc.ready
	job.Status.Terminating = &terminating
	if err := c.trackStatus(ctx, jc, needsUpdate); err != nil {
		return jc, fmt.Errorf("job: %s: tracking status: %w", key, err)
	}
	return jc, manageErr
}

// podsOf is the pods the Job controls. Pods are not adopted: a Job's pods
// carry its controller reference from their creation.
func (c *Controller) podsOf(job *batchv1.Job) []*corev1.Pod {
	pods := c.pods.ByIndex(consumer.IndexOwner, string(job.UID))
	out := pods[:0:0]
	for _, p := range pods {
		if p.Namespace == job.Namespace {
			out = append(out, p)
		}
	}
	return out
}

// releaseOrphans removes the tracking finalizer from pods of the Job
// ns/name that is gone (uid empty) or finished (kube's syncOrphanPod).
func (c *Controller) releaseOrphans(ctx context.Context, ns, name string, uid types.UID) error {
	var pods []*corev1.Pod
	for _, p := range c.pods.ByIndex(consumer.IndexNamespace, ns) {
		if _, ref := jobOf(p); ref != nil && ref.Name == name && (uid == "" || ref.UID == uid) && hasJobTrackingFinalizer(p) {
			pods = append(pods, p)
		}
	}
	if uid != "" {
		// A finished Job's pods that are still running keep the finalizer
		// until they finish or are deleted (they were asked to).
		pods = slices.DeleteFunc(pods, func(p *corev1.Pod) bool { return isActive(p) })
	}
	for _, p := range pods {
		if err := c.removeFinalizer(ctx, p); err != nil {
			return err
		}
	}
	return nil
}

func (c *Controller) pastActiveDeadline(job *batchv1.Job) bool {
	if job.Spec.ActiveDeadlineSeconds == nil || job.Status.StartTime == nil || jobSuspended(job) {
		return false
	}
	return c.now().Sub(job.Status.StartTime.Time) >= time.Duration(*job.Spec.ActiveDeadlineSeconds)*time.Second
}

// pastBackoffLimitOnFailure: with restartPolicy OnFailure, the container
// restarts of running and pending pods reach backoffLimit.
func pastBackoffLimitOnFailure(job *batchv1.Job, pods []*corev1.Pod) bool {
	if job.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyOnFailure {
		return false
	}
	var n int32
	for _, p := range pods {
		if p.Status.Phase != corev1.PodRunning && p.Status.Phase != corev1.PodPending {
			continue
		}
		for _, cs := range p.Status.InitContainerStatuses {
			n += cs.RestartCount
		}
		for _, cs := range p.Status.ContainerStatuses {
			n += cs.RestartCount
		}
	}
	if *job.Spec.BackoffLimit == 0 {
		return n > 0
	}
	return n >= *job.Spec.BackoffLimit
}

// newFinishedPods are the succeeded and failed pods not counted yet.
func newFinishedPods(jc *syncJobCtx) (succeeded, failed []*corev1.Pod) {
	succeeded = validPods(jc, jc.uncounted.succeeded, func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })
	failed = validPods(jc, jc.uncounted.failed, func(p *corev1.Pod) bool { return isPodFailed(p, jc.job) })
	return succeeded, failed
}

// validPods are the pods that pass filter among those with a tracking
// finalizer that are neither in skip nor already counted, and, for an
// Indexed Job, with a valid index.
func validPods(jc *syncJobCtx, skip map[types.UID]struct{}, filter func(*corev1.Pod) bool) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range jc.pods {
		if _, ok := skip[p.UID]; ok || !hasJobTrackingFinalizer(p) {
			continue
		}
		if _, ok := jc.expectedRmFinalizers[p.UID]; ok {
			continue
		}
		if isIndexedJob(jc.job) {
			if ix := getCompletionIndex(p.Annotations); ix == unknownCompletionIndex || ix >= int(*jc.job.Spec.Completions) {
				continue
			}
		}
		if filter(p) {
			out = append(out, p)
		}
	}
	return out
}

func nonIgnoredFailedPodsCount(jc *syncJobCtx, failed []*corev1.Pod) int {
	n := len(failed)
	if jc.job.Spec.PodFailurePolicy != nil {
		for _, p := range failed {
			if _, count, _ := matchPodFailurePolicy(jc.job.Spec.PodFailurePolicy, p); !count {
				n--
			}
		}
	}
	return n
}

func jobSuspended(job *batchv1.Job) bool { return job.Spec.Suspend != nil && *job.Spec.Suspend }

// isJobFinished: Complete or Failed is true.
func isJobFinished(job *batchv1.Job) bool {
	_, ok := finishedCondition(job)
	return ok
}

// finishedCondition is the Job's true Complete or Failed condition.
func finishedCondition(job *batchv1.Job) (batchv1.JobCondition, bool) {
	for _, c := range job.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return c, true
		}
	}
	return batchv1.JobCondition{}, false
}

func findTrueCondition(job *batchv1.Job, t batchv1.JobConditionType) *batchv1.JobCondition {
	if c := findConditionByType(job.Status.Conditions, t); c != nil && c.Status == corev1.ConditionTrue {
		return c
	}
	return nil
}

func findConditionByType(list []batchv1.JobCondition, t batchv1.JobConditionType) *batchv1.JobCondition {
	for i := range list {
		if list[i].Type == t {
			return &list[i]
		}
	}
	return nil
}

// newFailureCondition is the interim FailureTarget (JobManagedBy is on by
// default: the Failed condition follows once no pod is terminating).
func newFailureCondition(reason, message string, now time.Time) *batchv1.JobCondition {
	return newCondition(batchv1.JobFailureTarget, corev1.ConditionTrue, reason, message, now)
}

func newCondition(t batchv1.JobConditionType, status corev1.ConditionStatus, reason, message string, now time.Time) *batchv1.JobCondition {
	return &batchv1.JobCondition{Type: t, Status: status, LastProbeTime: metav1.NewTime(now), LastTransitionTime: metav1.NewTime(now),
		Reason: reason, Message: message}
}

// ensureJobConditionStatus sets condition t to status, appending it unless
// it is new and false; it reports whether the list changed.
func ensureJobConditionStatus(list []batchv1.JobCondition, t batchv1.JobConditionType, status corev1.ConditionStatus, reason, message string, now time.Time) ([]batchv1.JobCondition, bool) {
	if c := findConditionByType(list, t); c != nil {
		if c.Status != status || c.Reason != reason || c.Message != message {
			*c = *newCondition(t, status, reason, message, now)
			return list, true
		}
		return list, false
	}
	if status != corev1.ConditionFalse {
		return append(list, *newCondition(t, status, reason, message, now)), true
	}
	return list, false
}

func ptrEqual[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// isGone: the pod is already deleted, which counts as done for a removal.
func isGone(err error) bool { return apierrors.IsNotFound(err) }
