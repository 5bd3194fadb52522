package statefulset

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// This file ports kube's stateful_set_control.go: one round over a set's
// pods, given its current and update revisions.

// maxBatchSize caps the writes of one slow-start batch (kube's
// MaxBatchSize).
const maxBatchSize = 500

// round is what one pass of run knows.
type round struct {
	c                          *Controller
	set, currentSet, updateSet *appsv1.StatefulSet
	current, update            *appsv1.ControllerRevision
	now                        time.Time
	log                        logger
	// availableIn is the soonest a ready pod becomes available.
	availableIn time.Duration
}

type logger interface {
	Debug(msg string, args ...any)
	Info(msg string, args ...any)
}

// run creates, updates and deletes set's pods towards spec (kube's
// updateStatefulSet): pods of ordinals [start, start+replicas) exist,
// ordered (OrderedReady: one at a time, each once its predecessors are
// Running, Ready and available; scale-down from the highest ordinal,
// waiting for each to go) or all at once (Parallel); then, for
// RollingUpdate, pods from the partition up not at the update revision
// are deleted from the highest ordinal, at most maxUnavailable
// unavailable at a time, to be recreated at it. The status returned is
// valid even with an error.
func (r *round) run(ctx context.Context, pods []*corev1.Pod, collisionCount int32) (*appsv1.StatefulSetStatus, error) {
	set := r.set
	status := &appsv1.StatefulSetStatus{
		ObservedGeneration: set.Generation,
		CurrentRevision:    r.current.Name,
		UpdateRevision:     r.update.Name,
		CollisionCount:     &collisionCount,
	}
	r.countStatus(status, pods)

	replicaCount := int(replicasOf(set))
	replicas := make([]*corev1.Pod, replicaCount)
	var condemned []*corev1.Pod
	start := startOrdinal(set)
	for _, pod := range pods {
		switch {
		case inOrdinalRange(pod, set):
			replicas[ordinalOf(pod)-start] = pod
		case ordinalOf(pod) >= 0:
			condemned = append(condemned, pod)
		}
		// A name without an ordinal is not one of the set's pods.
	}
	for i := range replicas {
		if replicas[i] == nil {
			replicas[i] = newVersionedPod(r.currentSet, r.updateSet, r.current.Name, r.update.Name, start+i)
		}
	}
	slices.SortFunc(condemned, func(a, b *corev1.Pod) int { return ordinalOf(b) - ordinalOf(a) })

	// The first unavailable pod: of the replicas in ascending order,
	// else of the condemned in ascending order.
	var firstUnavailable *corev1.Pod
	for _, p := range replicas {
		if r.unavailable(p) {
			firstUnavailable = p
			break
		}
	}
	if firstUnavailable == nil {
		for i := len(condemned) - 1; i >= 0; i-- {
			if r.unavailable(condemned[i]) {
				firstUnavailable = condemned[i]
				break
			}
		}
	}

	if set.DeletionTimestamp != nil {
		// Being deleted: status only.
		return status, nil
	}
	monotonic := !allowsBurst(set)
	recount := func() { r.countStatus(status, append(slices.Clone(replicas), condemned...)) }

	if exit, err := runForAll(replicas, func(i int) (bool, error) {
		return r.processReplica(ctx, monotonic, replicas, i)
	}, monotonic); exit || err != nil {
		recount()
		return status, err
	}
	// The retention policy's owner references on the claims of condemned
	// pods (kube's fixPodClaim), before they go.
	if len(set.Spec.VolumeClaimTemplates) > 0 {
		if exit, err := runForAll(condemned, func(i int) (bool, error) {
			err := r.c.fixClaims(ctx, set, condemned[i])
			return err != nil, err
		}, monotonic); exit || err != nil {
			recount()
			return status, err
		}
	}
	if exit, err := runForAll(condemned, func(i int) (bool, error) {
		return r.processCondemned(ctx, firstUnavailable, monotonic, condemned, i)
	}, monotonic); exit || err != nil {
		recount()
		return status, err
	}
	recount()

	if set.Spec.UpdateStrategy.Type == appsv1.OnDeleteStatefulSetStrategyType {
		// Pods are updated when they are deleted by hand.
		return status, nil
	}
	return status, r.rollingUpdate(ctx, replicas, status)
}

// countStatus sets the replica counts of status from pods (kube's
// updateStatus).
func (r *round) countStatus(status *appsv1.StatefulSetStatus, pods []*corev1.Pod) {
	status.Replicas, status.ReadyReplicas, status.AvailableReplicas = 0, 0, 0
	status.CurrentReplicas, status.UpdatedReplicas = 0, 0
	for _, pod := range pods {
		if isCreated(pod) {
			status.Replicas++
		}
		if isRunningAndReady(pod) {
			status.ReadyReplicas++
			if ok, after := availableAt(pod, r.set.Spec.MinReadySeconds, r.now); ok {
				status.AvailableReplicas++
			} else if after > 0 && (r.availableIn == 0 || after < r.availableIn) {
				r.availableIn = after
			}
		}
		if isCreated(pod) && !isTerminating(pod) {
			if podRevision(pod) == r.current.Name {
				status.CurrentReplicas++
			}
			if podRevision(pod) == r.update.Name {
				status.UpdatedReplicas++
			}
		}
	}
}

// unavailable: not healthy, or not yet available (kube's isUnavailable).
func (r *round) unavailable(pod *corev1.Pod) bool {
	ok, _ := availableAt(pod, r.set.Spec.MinReadySeconds, r.now)
	return !isHealthy(pod) || !ok
}

// processReplica handles the pod of replicas[i]; exit means stop this
// round (kube's processReplica).
func (r *round) processReplica(ctx context.Context, monotonic bool, replicas []*corev1.Pod, i int) (exit bool, err error) {
	pod := replicas[i]
	log := r.log
	if isFinished(pod) {
		// A pod that ended (evicted, its node rebooted) is replaced,
		// whatever its exit code: deleted now, recreated once it is gone.
		if pod.DeletionTimestamp == nil {
			if err := r.c.deletePod(ctx, r.set, pod); err != nil {
				return true, err
			}
		}
		return true, nil
	}
	if !isCreated(pod) {
		if r.c.claimIsStale(r.set, pod) {
			log.Debug("waiting for a claim being deleted", "pod", pod.Name)
			return true, nil
		}
		if err := r.c.createPod(ctx, r.set, pod); err != nil {
			return true, err
		}
		if monotonic {
			return true, nil
		}
	}
	if isPending(pod) {
		if err := r.c.ensureClaims(ctx, r.set, pod); err != nil {
			return true, err
		}
	}
	if isCreated(pod) && len(r.set.Spec.VolumeClaimTemplates) > 0 {
		if err := r.c.fixClaims(ctx, r.set, pod); err != nil {
			return true, err
		}
	}
	if isTerminating(pod) && monotonic {
		log.Debug("waiting for pod to terminate", "pod", pod.Name)
		return true, nil
	}
	if !isRunningAndReady(pod) && monotonic {
		log.Debug("waiting for pod to be Running and Ready", "pod", pod.Name)
		return true, nil
	}
	if ok, _ := availableAt(pod, r.set.Spec.MinReadySeconds, r.now); !ok && monotonic {
		log.Debug("waiting for pod to be available", "pod", pod.Name)
		return true, nil
	}
	if !isCreated(pod) || identityMatches(r.set, pod) && storageMatches(r.set, pod) {
		return false, nil
	}
	return false, r.c.updatePod(ctx, r.updateSet, pod.DeepCopy())
}

// processCondemned deletes condemned[i], a pod past the last ordinal;
// OrderedReady waits for a terminating one to go and deletes only when
// every predecessor is available, or the pod is the first unavailable
// (kube's processCondemned).
func (r *round) processCondemned(ctx context.Context, firstUnavailable *corev1.Pod, monotonic bool, condemned []*corev1.Pod, i int) (bool, error) {
	pod := condemned[i]
	if isTerminating(pod) {
		if monotonic {
			r.log.Debug("waiting for pod to terminate before scale down", "pod", pod.Name)
			return true, nil
		}
		return false, nil
	}
	if monotonic && pod != firstUnavailable && r.unavailable(pod) {
		r.log.Debug("waiting for pod to be available before scale down: it is not the first unavailable", "pod", pod.Name)
		return true, nil
	}
	r.log.Info("deleting pod for scale down", "pod", pod.Name)
	return true, r.c.deletePod(ctx, r.set, pod)
}

// runForAll calls fn for each pod: one after the other, stopping at the
// first exit or error (monotonic), or in slow-start batches.
func runForAll(pods []*corev1.Pod, fn func(i int) (bool, error), monotonic bool) (bool, error) {
	if monotonic {
		for i := range pods {
			if exit, err := fn(i); exit || err != nil {
				return true, err
			}
		}
		return false, nil
	}
	if _, err := slowStartBatch(1, len(pods), fn); err != nil {
		return true, err
	}
	return false, nil
}

// slowStartBatch calls fn for 0..remaining-1 in batches of 1, 2, 4, ...
// (at most maxBatchSize), the calls of a batch in parallel, and stops
// after the first batch with an error (kube's slowStartBatch).
func slowStartBatch(initial, remaining int, fn func(int) (bool, error)) (int, error) {
	successes, next := 0, 0
	for batch := min(remaining, initial); batch > 0; batch = min(2*batch, remaining, maxBatchSize) {
		var (
			wg   sync.WaitGroup
			mu   sync.Mutex
			errs []error
		)
		for k := next; k < next+batch; k++ {
			wg.Go(func() {
				if _, err := fn(k); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		next += batch
		successes += batch - len(errs)
		if len(errs) > 0 {
			return successes, errors.Join(errs...)
		}
		remaining -= batch
	}
	return successes, nil
}

// rollingUpdate deletes, from the highest ordinal down to the partition,
// the pods not at the update revision, as long as at most maxUnavailable
// of the replicas are unavailable (kube's
// updateStatefulSetAfterInvariantEstablished, MaxUnavailableStatefulSet
// on). Each deleted pod is recreated at the update revision by a later
// round.
func (r *round) rollingUpdate(ctx context.Context, replicas []*corev1.Pod, status *appsv1.StatefulSetStatus) error {
	set := r.set
	updateMin, maxUnavail := 0, 1
	if ru := set.Spec.UpdateStrategy.RollingUpdate; ru != nil {
		updateMin = int(partitionOf(ru))
		var err error
		if maxUnavail, err = maxUnavailable(ru.MaxUnavailable, int(replicasOf(set))); err != nil {
			return err
		}
	}
	unavailable := 0
	for _, p := range replicas {
		if r.unavailable(p) {
			unavailable++
		}
	}
	if unavailable > maxUnavail {
		r.log.Debug("rolling update waits: too many unavailable pods", "unavailable", unavailable, "maxUnavailable", maxUnavail)
		return nil
	}
	toDelete, deleted := maxUnavail-unavailable, 0
	for target := len(replicas) - 1; target >= updateMin && deleted < toDelete; target-- {
		p := replicas[target]
		if podRevision(p) == r.update.Name || isTerminating(p) {
			continue
		}
		r.log.Info("deleting pod for update", "pod", p.Name, "revision", podRevision(p), "updateRevision", r.update.Name)
		if err := r.c.deletePod(ctx, set, p); err != nil {
			return err
		}
		deleted++
		status.CurrentReplicas--
	}
	return nil
}
