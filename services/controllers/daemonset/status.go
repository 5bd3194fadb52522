package daemonset

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// readyCondition is pod's Ready condition, nil if it has none.
func readyCondition(pod *corev1.Pod) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == corev1.PodReady {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

func isReady(pod *corev1.Pod) bool {
	c := readyCondition(pod)
	return c != nil && c.Status == corev1.ConditionTrue
}

// available reports whether pod has been ready for minReadySeconds at now
// (kube's podutil.IsPodAvailable).
func available(pod *corev1.Pod, minReadySeconds int32, now time.Time) bool {
	c := readyCondition(pod)
	if c == nil || c.Status != corev1.ConditionTrue {
		return false
	}
	if minReadySeconds == 0 {
		return true
	}
	min := time.Duration(minReadySeconds) * time.Second
	return !c.LastTransitionTime.IsZero() && c.LastTransitionTime.Add(min).Before(now)
}

// calculateStatus is the DaemonSet's status for this round (kube's
// updateDaemonSetStatus): per node that should run a pod, whether one is
// there, ready, available and of the current template; pods on other
// nodes are misscheduled. observedGeneration moves only when the round
// could act (expectations satisfied).
func calculateStatus(r *round, observe bool) appsv1.DaemonSetStatus {
	ds := r.ds
	st := ds.Status.DeepCopy()
	var desired, current, misscheduled, ready, updated, avail int32
	for _, n := range r.nodes {
		run, _ := r.place.shouldRun(n)
		pods := r.byNode[n.Name]
		if !run {
			if len(pods) > 0 {
				misscheduled++
			}
			continue
		}
		desired++
		if len(pods) == 0 {
			continue
		}
		current++
		pods = append([]*corev1.Pod(nil), pods...)
		sortOldestFirst(pods)
		p := pods[0]
		if isReady(p) {
			ready++
			if available(p, ds.Spec.MinReadySeconds, r.now) {
				avail++
			}
		}
		if isPodUpdated(p, r.hash, r.gen) {
			updated++
		}
	}
	st.DesiredNumberScheduled = desired
	st.CurrentNumberScheduled = current
	st.NumberMisscheduled = misscheduled
	st.NumberReady = ready
	st.UpdatedNumberScheduled = updated
	st.NumberAvailable = avail
	st.NumberUnavailable = desired - avail
	if observe {
		st.ObservedGeneration = ds.Generation
	}
	return *st
}

// updateStatus writes the round's status if it changed, retrying a
// conflict once on a fresh read (kube's storeDaemonSetStatus), and asks
// for a round when a ready pod becomes available.
func (c *Controller) updateStatus(ctx context.Context, r *round, observe bool) error {
	ds := r.ds
	st := calculateStatus(r, observe)
	if ds.Spec.MinReadySeconds > 0 && st.NumberReady != st.NumberAvailable {
		r.requeueAfter(time.Duration(ds.Spec.MinReadySeconds) * time.Second)
	}
	if apiequality.Semantic.DeepEqual(ds.Status, st) {
		return nil
	}
	api := c.client.AppsV1().DaemonSets(ds.Namespace)
	cur := ds.DeepCopy()
	for attempt := 0; ; attempt++ {
		cur.Status = st
		_, err := api.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		if err == nil || apierrors.IsNotFound(err) {
			return nil
		}
		if !apierrors.IsConflict(err) || attempt > 0 {
			return fmt.Errorf("daemonset: %s: update status: %w", r.key, err)
		}
		fresh, gerr := api.Get(ctx, ds.Name, metav1.GetOptions{})
		if gerr != nil || fresh.UID != ds.UID {
			return fmt.Errorf("daemonset: %s: update status: %w", r.key, err)
		}
		// Keep what others wrote (collisionCount) and our counts.
		st.CollisionCount = fresh.Status.CollisionCount
		if !observe {
			st.ObservedGeneration = fresh.Status.ObservedGeneration
		}
		cur = fresh
	}
}
