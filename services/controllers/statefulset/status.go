package statefulset

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cairn-dev/cairn/events/consumer"
)

// This file ports kube's stateful_set_status_updater.go and the status
// end of stateful_set_control.go.

// completeRollingUpdate: once every replica is updated and ready, the
// update revision becomes the current one.
func completeRollingUpdate(set *appsv1.StatefulSet, status *appsv1.StatefulSetStatus) {
	n := replicasOf(set)
	if set.Spec.UpdateStrategy.Type == appsv1.RollingUpdateStatefulSetStrategyType &&
		status.UpdatedReplicas == n && status.ReadyReplicas == n && status.Replicas == n {
		status.CurrentReplicas = status.UpdatedReplicas
		status.CurrentRevision = status.UpdateRevision
	}
}

// statusChanged reports whether status differs from set's in what kube
// compares (kube's inconsistentStatus), or in the collision count.
func statusChanged(set *appsv1.StatefulSet, status *appsv1.StatefulSetStatus) bool {
	old := &set.Status
	return status.ObservedGeneration > old.ObservedGeneration ||
		status.Replicas != old.Replicas ||
		status.CurrentReplicas != old.CurrentReplicas ||
		status.ReadyReplicas != old.ReadyReplicas ||
		status.UpdatedReplicas != old.UpdatedReplicas ||
		status.CurrentRevision != old.CurrentRevision ||
		status.AvailableReplicas != old.AvailableReplicas ||
		status.UpdateRevision != old.UpdateRevision ||
		ptrOr(status.CollisionCount, 0) != ptrOr(old.CollisionCount, 0)
}

func ptrOr[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}

// writeStatus completes a finished rolling update in status and writes
// it if it changed; a conflict is retried on a fresh read (kube's
// UpdateStatefulSetStatus). The write is remembered so that the next
// round waits until the cache shows it.
func (c *Controller) writeStatus(ctx context.Context, set *appsv1.StatefulSet, status *appsv1.StatefulSetStatus) error {
	completeRollingUpdate(set, status)
	if !statusChanged(set, status) {
		return nil
	}
	api := c.client.AppsV1().StatefulSets(set.Namespace)
	cur := set.DeepCopy()
	for attempt := 0; ; attempt++ {
		cur.Status = *status
		out, err := api.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		if err == nil {
			c.written.Wrote(consumer.KeyOf(set), out.ResourceVersion)
			return nil
		}
		if apierrors.IsNotFound(err) {
			return nil
		}
		if !apierrors.IsConflict(err) || attempt >= 4 {
			return fmt.Errorf("statefulset: %s/%s: update status: %w", set.Namespace, set.Name, err)
		}
		fresh, gerr := api.Get(ctx, set.Name, metav1.GetOptions{})
		if gerr != nil {
			return fmt.Errorf("statefulset: %s/%s: update status: %w", set.Namespace, set.Name, gerr)
		}
		if fresh.UID != set.UID || fresh.Generation != set.Generation {
			// Replaced, or the spec moved on: the next round computes a
			// new status.
			return nil
		}
		cur = fresh
	}
}
