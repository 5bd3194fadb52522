package job

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// manageJob creates or deletes pods so that the Job runs as many as it
// should (kube's manageJob), respecting the back-off; it returns the
// number of active pods after it. It never both creates and deletes.
func (c *Controller) manageJob(ctx context.Context, jc *syncJobCtx) (int32, error) {
	job := jc.job
	active := int32(len(jc.activePods))
	if jobSuspended(job) {
		victims := activePodsForRemoval(job, jc.activePods, int(active))
		c.expect.expectDeletions(jc.key, job.UID, len(victims))
		removedReady, removed, err := c.deleteJobPods(ctx, jc, victims)
		jc.terminating += removed
		jc.ready -= removedReady
		return active - removed, err
	}
	parallelism := *job.Spec.Parallelism
	var want int32
	if job.Spec.Completions == nil {
		// Once one pod succeeded, what runs keeps running and no more start.
		if jc.succeeded > 0 {
			want = active
		} else {
			want = parallelism
		}
	} else {
		want = max(min(*job.Spec.Completions-jc.succeeded, parallelism), 0)
	}
	victims := activePodsForRemoval(job, jc.activePods, int(max(active-want, 0)))
	if len(victims) > MaxPodCreateDeletePerSync {
		victims = victims[:MaxPodCreateDeletePerSync]
	}
	if len(victims) > 0 {
		c.expect.expectDeletions(jc.key, job.UID, len(victims))
		c.log.Debug("too many pods running", "key", jc.key, "deleting", len(victims), "want", want)
		removedReady, removed, err := c.deleteJobPods(ctx, jc, victims)
		jc.terminating += removed
		jc.ready -= removedReady
		return active - removed, err
	}
	var terminating int32
	if onlyReplaceFailedPods(job) {
		terminating = jc.terminating
	}
	diff := want - terminating - active
	if diff <= 0 {
		return active, nil
	}
	if !hasBackoffLimitPerIndex(job) {
		if wait := jc.newBackoffRecord.remainingTime(c.now()); wait > 0 {
			jc.requeueAfter(wait)
			return 0, nil
		}
	}
	diff = min(diff, MaxPodCreateDeletePerSync)
	var indexes []int
	if isIndexedJob(job) {
		indexes = firstPendingIndexes(jc, int(diff), int(*job.Spec.Completions))
		if hasBackoffLimitPerIndex(job) {
			var wait time.Duration
			indexes, wait = c.creatableIndexes(indexes, jc.podsWithDelayedDeletionPerIndex)
			if wait > 0 {
				jc.requeueAfter(wait)
				return 0, nil
			}
		}
		diff = int32(len(indexes))
	}
	created, err := c.createPods(ctx, jc, int(diff), indexes)
	return active + int32(created), err
}

// creatableIndexes are those of indexes whose back-off has passed; if
// none, the shortest wait among them.
func (c *Controller) creatableIndexes(indexes []int, delayed map[int]*corev1.Pod) ([]int, time.Duration) {
	var now []int
	var least time.Duration
	for _, ix := range indexes {
		wait := remainingTimePerIndex(c, delayed[ix])
		if wait == 0 {
			now = append(now, ix)
		} else if least == 0 || wait < least {
			least = wait
		}
	}
	if len(now) > 0 {
		return now, 0
	}
	return nil, least
}

// createPods creates n pods (one per index for an Indexed Job) in slow-start
// batches of 1, 2, 4, ...: a batch with a failure ends the round. It
// returns how many were created.
func (c *Controller) createPods(ctx context.Context, jc *syncJobCtx, n int, indexes []int) (int, error) {
	job := jc.job
	c.expect.expectCreations(jc.key, job.UID, n)
	c.log.Debug("too few pods running", "key", jc.key, "creating", n)
	template := job.Spec.Template.DeepCopy()
	if isIndexedJob(job) {
		addCompletionIndexEnvVariables(template)
	}
	if !slices.Contains(template.Finalizers, batchv1.JobTrackingFinalizer) {
		template.Finalizers = append(template.Finalizers, batchv1.JobTrackingFinalizer)
	}
	var created atomic.Int32
	var errs []error
	var mu sync.Mutex
	remaining := n
	for batch := min(remaining, slowStartInitialBatchSize); remaining > 0; batch = min(2*batch, remaining) {
		var wg sync.WaitGroup
		failed := false
		for range batch {
			ix := unknownCompletionIndex
			if len(indexes) > 0 {
				ix, indexes = indexes[0], indexes[1:]
			}
			wg.Go(func() {
				err := c.createPod(ctx, jc, template, ix)
				if err == nil {
					created.Add(1)
					return
				}
				// The pod will never be observed.
				c.expect.creationObserved(jc.key, job.UID)
				if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
					return
				}
				mu.Lock()
				errs = append(errs, err)
				failed = true
				mu.Unlock()
			})
		}
		wg.Wait()
		remaining -= batch
		if failed {
			for range remaining {
				c.expect.creationObserved(jc.key, job.UID)
			}
			break
		}
	}
	if len(errs) > 0 {
		return int(created.Load()), fmt.Errorf("job: %s: create pods: %w", jc.key, errors.Join(errs...))
	}
	return int(created.Load()), nil
}

func (c *Controller) createPod(ctx context.Context, jc *syncJobCtx, template *corev1.PodTemplateSpec, ix int) error {
	job := jc.job
	t := template
	generateName := job.Name + "-"
	if ix != unknownCompletionIndex {
		t = template.DeepCopy()
		addCompletionIndexAnnotationAndLabel(t, ix)
		t.Spec.Hostname = fmt.Sprintf("%s-%d", job.Name, ix)
		generateName = podGenerateNameWithIndex(job.Name, ix)
		if hasBackoffLimitPerIndex(job) {
			addIndexFailureCountAnnotation(c.log, t, job, jc.podsWithDelayedDeletionPerIndex[ix])
		}
	}
	yes := true
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: generateName, Namespace: job.Namespace,
			Labels: t.Labels, Annotations: t.Annotations, Finalizers: t.Finalizers,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: controllerKind.GroupVersion().String(), Kind: controllerKind.Kind,
				Name: job.Name, UID: job.UID, Controller: &yes, BlockOwnerDeletion: &yes}},
		},
		Spec: t.Spec,
	}
	out, err := c.client.CoreV1().Pods(job.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		c.event(ctx, job, corev1.EventTypeWarning, "FailedCreate", fmt.Sprintf("Error creating: %v", err))
		return err
	}
	c.event(ctx, job, corev1.EventTypeNormal, "SuccessfulCreate", "Created pod: "+out.Name)
	return nil
}

// deleteActivePods deletes pods of a finishing Job, keeping their
// finalizers: trackStatus counts them and removes the finalizers.
func (c *Controller) deleteActivePods(ctx context.Context, job *batchv1.Job, pods []*corev1.Pod) (ready, deleted int32, err error) {
	return c.deletePods(ctx, job, pods, func(p *corev1.Pod) error { return nil })
}

// deleteJobPods removes the finalizer of, then deletes, pods the Job has
// too many of (they are not counted as failed).
func (c *Controller) deleteJobPods(ctx context.Context, jc *syncJobCtx, pods []*corev1.Pod) (ready, deleted int32, err error) {
	return c.deletePods(ctx, jc.job, pods, func(p *corev1.Pod) error {
		if err := c.removeFinalizer(ctx, p); err != nil {
			c.expect.deletionObserved(jc.key, jc.job.UID)
			return fmt.Errorf("removing completion finalizer: %w", err)
		}
		return nil
	})
}

func (c *Controller) deletePods(ctx context.Context, job *batchv1.Job, pods []*corev1.Pod, before func(*corev1.Pod) error) (int32, int32, error) {
	var ready, deleted atomic.Int32
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for _, p := range pods {
		wg.Go(func() {
			err := before(p)
			if err == nil {
				err = c.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{})
				if err == nil {
					c.event(ctx, job, corev1.EventTypeNormal, "SuccessfulDelete", "Deleted pod: "+p.Name)
				}
			}
			if err != nil && !isGone(err) {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
				c.event(ctx, job, corev1.EventTypeWarning, "FailedDelete", fmt.Sprintf("Error deleting: %v", err))
				return
			}
			deleted.Add(1)
			if isPodReady(p) {
				ready.Add(1)
			}
		})
	}
	wg.Wait()
	return ready.Load(), deleted.Load(), errors.Join(errs...)
}

// removeFinalizer removes the tracking finalizer with kube's strategic
// merge patch; a pod already gone counts as done.
func (c *Controller) removeFinalizer(ctx context.Context, p *corev1.Pod) error {
	if !hasJobTrackingFinalizer(p) {
		return nil
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{
		"$deleteFromPrimitiveList/finalizers": []string{batchv1.JobTrackingFinalizer},
	}})
	_, err := c.client.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
	if err != nil && !isGone(err) {
		return err
	}
	return nil
}

// activePodsForRemoval: for an Indexed Job the pods of repeated or invalid
// indexes, then the least useful pods until rmAtLeast.
func activePodsForRemoval(job *batchv1.Job, pods []*corev1.Pod, rmAtLeast int) []*corev1.Pod {
	var rm, left []*corev1.Pod
	pods = append([]*corev1.Pod(nil), pods...)
	if isIndexedJob(job) {
		rm, left = appendDuplicatedIndexPodsForRemoval(nil, nil, pods, int(*job.Spec.Completions))
	} else {
		left = pods
	}
	if len(rm) < rmAtLeast {
		sortActivePods(left)
		rm = append(rm, left[:rmAtLeast-len(rm)]...)
	}
	return rm
}
