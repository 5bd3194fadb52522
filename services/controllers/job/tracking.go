package job

import (
	"context"
	"errors"
	"fmt"
	"sync"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// trackStatus is kube's trackJobStatusAndRemoveFinalizers: it adds the
// finished pods to status.uncountedTerminatedPods, removes their
// finalizers, moves the pods whose finalizer is gone to the counters, and
// sets the terminal condition once nothing is left uncounted or
// terminating. At most MaxUncountedPods pods are handled per round.
func (c *Controller) trackStatus(ctx context.Context, jc *syncJobCtx, needsFlush bool) error {
	job := jc.job
	indexed := isIndexedJob(job)
	if indexed {
		sortByCompletionIndex(jc.pods)
	}
	withFinalizer := map[types.UID]struct{}{}
	for _, p := range jc.pods {
		if _, removed := jc.expectedRmFinalizers[p.UID]; hasJobTrackingFinalizer(p) && !removed {
			withFinalizer[p.UID] = struct{}{}
		}
	}
	if cleanUncountedPodsWithoutFinalizers(&job.Status, withFinalizer) {
		needsFlush = true
	}
	uncountedStatus := job.Status.UncountedTerminatedPods
	var toRelease []*corev1.Pod
	var newSucceededIndexes []int
	reachedMax := false
	for _, pod := range jc.pods {
		if _, ok := withFinalizer[pod.UID]; !ok {
			continue // counted in an earlier round
		}
		failed := isPodFailed(pod, job)
		if !canRemoveFinalizer(jc, pod, failed) {
			continue
		}
		toRelease = append(toRelease, pod)
		_, inFailed := jc.uncounted.failed[pod.UID]
		if pod.Status.Phase == corev1.PodSucceeded && !inFailed {
			if indexed {
				// The index is enough to count a success once.
				ix := getCompletionIndex(pod.Annotations)
				if ix != unknownCompletionIndex && ix < int(*job.Spec.Completions) && !jc.prevSucceededIndexes.has(ix) {
					newSucceededIndexes = append(newSucceededIndexes, ix)
					needsFlush = true
				}
			} else if _, ok := jc.uncounted.succeeded[pod.UID]; !ok {
				needsFlush = true
				uncountedStatus.Succeeded = append(uncountedStatus.Succeeded, pod.UID)
			}
		} else if failed || jc.finishedCondition != nil && jc.finishedCondition.Type != batchv1.JobSuccessCriteriaMet {
			// Once the Job fails, every pod not finished counts as failed.
			ix := getCompletionIndex(pod.Annotations)
			if !inFailed && (!indexed || ix != unknownCompletionIndex && ix < int(*job.Spec.Completions)) {
				if _, count, _ := matchPodFailurePolicy(job.Spec.PodFailurePolicy, pod); count {
					needsFlush = true
					uncountedStatus.Failed = append(uncountedStatus.Failed, pod.UID)
				}
			}
		}
		if len(newSucceededIndexes)+len(uncountedStatus.Succeeded)+len(uncountedStatus.Failed) >= MaxUncountedPods {
			// The status and the pod updates queue the Job again.
			reachedMax = true
			break
		}
	}
	if indexed {
		jc.succeededIndexes = jc.succeededIndexes.withOrderedIndexes(sortedUnique(newSucceededIndexes))
		s := jc.succeededIndexes.String()
		if s != job.Status.CompletedIndexes {
			needsFlush = true
		}
		job.Status.Succeeded = int32(jc.succeededIndexes.total())
		job.Status.CompletedIndexes = s
		var failedIndexes *string
		if jc.failedIndexes != nil {
			f := jc.failedIndexes.String()
			failedIndexes = &f
		}
		if !ptrEqual(job.Status.FailedIndexes, failedIndexes) {
			job.Status.FailedIndexes = failedIndexes
			needsFlush = true
		}
	}
	now := c.now()
	if fc := jc.finishedCondition; fc != nil && fc.Type == batchv1.JobFailureTarget {
		// The interim condition records the reason before the finalizers
		// go; Failed follows.
		job.Status.Conditions = append(job.Status.Conditions, *fc)
		needsFlush = true
		jc.finishedCondition = newCondition(batchv1.JobFailed, corev1.ConditionTrue, fc.Reason, fc.Message, now)
	}
	if fc := jc.finishedCondition; fc != nil && fc.Type == batchv1.JobSuccessCriteriaMet && fc.Status == corev1.ConditionTrue {
		if findTrueCondition(job, batchv1.JobSuccessCriteriaMet) == nil {
			job.Status.Conditions = append(job.Status.Conditions, *fc)
			needsFlush = true
		}
		jc.finishedCondition = newCondition(batchv1.JobComplete, corev1.ConditionTrue, fc.Reason, fc.Message, now)
	}
	needsFlush, err := c.flushAndRelease(ctx, jc, toRelease, withFinalizer, needsFlush)
	if err != nil {
		return err
	}
	finished := !reachedMax && c.enactJobFinished(jc)
	if finished {
		needsFlush = true
	}
	if needsFlush {
		if err := c.updateStatus(ctx, jc); err != nil {
			return fmt.Errorf("removing uncounted pods from status: %w", err)
		}
		if finished {
			c.recordFinished(ctx, jc)
		}
	}
	return nil
}

// canRemoveFinalizer: the Job is going or finishing, the pod succeeded, or
// it failed and is not kept for its index's failure count.
func canRemoveFinalizer(jc *syncJobCtx, pod *corev1.Pod, failed bool) bool {
	if jc.job.DeletionTimestamp != nil || jc.finishedCondition != nil || pod.Status.Phase == corev1.PodSucceeded {
		return true
	}
	if !failed {
		return false
	}
	if hasBackoffLimitPerIndex(jc.job) {
		if ix := getCompletionIndex(pod.Annotations); ix != unknownCompletionIndex {
			if p, ok := jc.podsWithDelayedDeletionPerIndex[ix]; ok && p.UID == pod.UID {
				return false
			}
		}
	}
	return true
}

// flushAndRelease writes the status with the new uncounted pods (and any
// interim condition), removes the finalizers of toRelease, and moves the
// released pods to the counters; on a partial failure it writes the
// progress. It reports whether a status change is still unwritten.
func (c *Controller) flushAndRelease(ctx context.Context, jc *syncJobCtx, toRelease []*corev1.Pod, withFinalizer map[types.UID]struct{}, needsFlush bool) (bool, error) {
	if needsFlush {
		if err := c.updateStatus(ctx, jc); err != nil {
			return needsFlush, fmt.Errorf("adding uncounted pods to status: %w", err)
		}
		c.backoff.update(jc.key, jc.newBackoffRecord)
		needsFlush = false
	}
	var rmErr error
	if len(toRelease) > 0 {
		var released []bool
		released, rmErr = c.removeFinalizers(ctx, jc.key, toRelease)
		for i, p := range toRelease {
			if released[i] {
				delete(withFinalizer, p.UID)
			}
		}
	}
	if cleanUncountedPodsWithoutFinalizers(&jc.job.Status, withFinalizer) {
		needsFlush = true
	}
	if rmErr != nil && needsFlush {
		if err := c.updateStatus(ctx, jc); err != nil {
			return needsFlush, fmt.Errorf("removing uncounted pods from status: %w", err)
		}
	}
	return needsFlush, rmErr
}

// removeFinalizers removes the tracking finalizer from pods, remembering
// the removals until the cache shows them; released[i] tells whether pod i
// has none left.
func (c *Controller) removeFinalizers(ctx context.Context, key string, pods []*corev1.Pod) ([]bool, error) {
	uids := make([]types.UID, len(pods))
	for i, p := range pods {
		uids[i] = p.UID
	}
	c.finalizers.expectRemoved(key, uids)
	released := make([]bool, len(pods))
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for i, p := range pods {
		wg.Go(func() {
			if err := c.removeFinalizer(ctx, p); err != nil {
				c.finalizers.removalObserved(key, p.UID)
				mu.Lock()
				errs = append(errs, fmt.Errorf("removing tracking finalizer: %w", err))
				mu.Unlock()
				return
			}
			released[i] = true
		})
	}
	wg.Wait()
	return released, errors.Join(errs...)
}

// cleanUncountedPodsWithoutFinalizers moves the uncounted pods whose
// finalizer is gone to status.succeeded and status.failed.
func cleanUncountedPodsWithoutFinalizers(status *batchv1.JobStatus, withFinalizer map[types.UID]struct{}) bool {
	updated := false
	u := status.UncountedTerminatedPods
	if kept := keepUIDs(u.Succeeded, withFinalizer); len(kept) != len(u.Succeeded) {
		updated = true
		status.Succeeded += int32(len(u.Succeeded) - len(kept))
		u.Succeeded = kept
	}
	if kept := keepUIDs(u.Failed, withFinalizer); len(kept) != len(u.Failed) {
		updated = true
		status.Failed += int32(len(u.Failed) - len(kept))
		u.Failed = kept
	}
	return updated
}

func keepUIDs(uids []types.UID, include map[types.UID]struct{}) []types.UID {
	var out []types.UID
	for _, u := range uids {
		if _, ok := include[u]; ok {
			out = append(out, u)
		}
	}
	return out
}

// enactJobFinished sets the terminal condition (and completionTime) once
// no pod is left uncounted or terminating.
func (c *Controller) enactJobFinished(jc *syncJobCtx) bool {
	fc := jc.finishedCondition
	if fc == nil {
		return false
	}
	job := jc.job
	if u := job.Status.UncountedTerminatedPods; u != nil && len(u.Succeeded)+len(u.Failed) > 0 {
		return false
	}
	if jc.terminating > 0 {
		return false
	}
	job.Status.Conditions, _ = ensureJobConditionStatus(job.Status.Conditions, fc.Type, fc.Status, fc.Reason, fc.Message, c.now())
	if fc.Type == batchv1.JobComplete {
		job.Status.CompletionTime = &fc.LastTransitionTime
	}
	return true
}

func (c *Controller) recordFinished(ctx context.Context, jc *syncJobCtx) {
	job, fc := jc.job, jc.finishedCondition
	if fc.Type == batchv1.JobComplete {
		if job.Spec.Completions != nil && job.Status.Succeeded > *job.Spec.Completions {
			c.event(ctx, job, corev1.EventTypeWarning, "TooManySucceededPods", "Too many succeeded pods running after completion count reached")
		}
		c.event(ctx, job, corev1.EventTypeNormal, "Completed", "Job completed")
		return
	}
	c.event(ctx, job, corev1.EventTypeWarning, fc.Reason, fc.Message)
}

// updateStatus writes jc.job's status at its resourceVersion (a stale
// status conflicts and the round is retried) and keeps the result.
func (c *Controller) updateStatus(ctx context.Context, jc *syncJobCtx) error {
	out, err := c.client.BatchV1().Jobs(jc.job.Namespace).UpdateStatus(ctx, jc.job, metav1.UpdateOptions{})
	if err != nil {
		return err
	}
	// Keep the working copy's uncounted lists: the server's are equal.
	jc.job.ResourceVersion = out.ResourceVersion
	c.written.Wrote(jc.key, out.ResourceVersion)
	return nil
}
