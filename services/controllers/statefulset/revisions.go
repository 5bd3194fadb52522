package statefulset

import (
	"context"
	"errors"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/cairn-dev/cairn/services/controllers/history"
)

// newRevision is the ControllerRevision of set's template as revision
// number rev: its patch, the template's labels and the set's annotations
// (so kubectl rollout history shows kubernetes.io/change-cause), named
// SET-HASH (kube's newRevision).
func newRevision(set *appsv1.StatefulSet, rev int64, collisionCount *int32) (*appsv1.ControllerRevision, error) {
	patch, err := revisionPatch(set)
	if err != nil {
		return nil, err
	}
	cr := history.NewControllerRevision(set, controllerKind, set.Spec.Template.Labels, runtime.RawExtension{Raw: patch}, rev, collisionCount)
	if cr.Annotations == nil {
		cr.Annotations = map[string]string{}
	}
	for k, v := range set.Annotations {
		cr.Annotations[k] = v
	}
	return cr, nil
}

// listRevisions is set's revisions (and orphans its selector matches),
// sorted.
func (c *Controller) listRevisions(set *appsv1.StatefulSet, sel labels.Selector) []*appsv1.ControllerRevision {
	revs := c.history.List(set, sel)
	history.SortControllerRevisions(revs)
	return revs
}

// adoptOrphanRevisions makes set the controller of the revisions its
// selector matches that have none, after a live read proves set is still
// there (kube's adoptOrphanRevisions).
func (c *Controller) adoptOrphanRevisions(ctx context.Context, set *appsv1.StatefulSet, revs []*appsv1.ControllerRevision) error {
	var orphans []int
	for i, r := range revs {
		if metav1.GetControllerOfNoCopy(r) == nil {
			orphans = append(orphans, i)
		}
	}
	if len(orphans) == 0 {
		return nil
	}
	ok, err := c.canAdopt(set)(ctx)
	if err != nil || !ok {
		return err
	}
	for _, i := range orphans {
		adopted, err := c.history.Adopt(ctx, set, controllerKind, revs[i])
		if err != nil {
			return fmt.Errorf("statefulset: %s/%s: %w", set.Namespace, set.Name, err)
		}
		revs[i] = adopted
	}
	return nil
}

// revisions finds set's current and update revisions (kube's
// getStatefulSetRevisions). The update revision is the revision of set's
// template: the latest one if it is that, an earlier equal one renumbered
// to the next number (a rollback), or a new one. The current revision is
// status.currentRevision, or the update revision for a set without one.
// collisionCount is status.collisionCount, raised by name collisions.
func (c *Controller) revisions(ctx context.Context, set *appsv1.StatefulSet, revs []*appsv1.ControllerRevision) (current, update *appsv1.ControllerRevision, collisionCount int32, err error) {
	if set.Status.CollisionCount != nil {
		collisionCount = *set.Status.CollisionCount
	}
	update, err = newRevision(set, history.NextRevision(revs), &collisionCount)
	if err != nil {
		return nil, nil, collisionCount, err
	}
	equal := history.FindEqualRevisions(revs, update)
	switch n := len(equal); {
	case n > 0 && history.EqualRevision(revs[len(revs)-1], equal[n-1]):
		// The template has not changed.
		update = revs[len(revs)-1]
	case n > 0:
		// Back to an earlier template: that revision becomes the latest.
		if update, err = c.history.Update(ctx, equal[n-1], update.Revision); err != nil {
			return nil, nil, collisionCount, err
		}
	default:
		if update, err = c.history.Create(ctx, set, update, &collisionCount); err != nil {
			return nil, nil, collisionCount, err
		}
	}
	for _, r := range revs {
		if r.Name == set.Status.CurrentRevision {
			current = r
			break
		}
	}
	if current == nil {
		current = update
	}
	return current, update, collisionCount, nil
}

// truncateHistory deletes the oldest revisions that are not live (the
// current and update revisions and those of set's pods) beyond
// spec.revisionHistoryLimit (kube's truncateHistory). revs is sorted.
func (c *Controller) truncateHistory(ctx context.Context, set *appsv1.StatefulSet, pods []*corev1.Pod, revs []*appsv1.ControllerRevision, current, update *appsv1.ControllerRevision) error {
	live := map[string]bool{}
	if current != nil {
		live[current.Name] = true
	}
	if update != nil {
		live[update.Name] = true
	}
	for _, p := range pods {
		live[podRevision(p)] = true
	}
	var old []*appsv1.ControllerRevision
	for _, r := range revs {
		if !live[r.Name] {
			old = append(old, r)
		}
	}
	limit := 10
	if set.Spec.RevisionHistoryLimit != nil {
		limit = int(*set.Spec.RevisionHistoryLimit)
	}
	if limit < 0 || len(old) <= limit {
		return nil
	}
	var errs []error
	for _, r := range old[:len(old)-limit] {
		if err := c.history.Delete(ctx, r); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
