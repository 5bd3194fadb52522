package daemonset

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/json"

	"github.com/cairn-dev/cairn/services/controllers/deployment"
	"github.com/cairn-dev/cairn/services/controllers/history"
)

// templatePatch is what a DaemonSet's ControllerRevision stores: a
// strategic merge patch that puts its pod template back,
// {"spec":{"template":{...,"$patch":"replace"}}}, byte for byte as kube's
// getPatch, with the same JSON package (kubectl rollout undo applies it, and compares it with the same
// bytes to skip a rollback to the current template).
func templatePatch(ds *appsv1.DaemonSet) ([]byte, error) {
	b, err := json.Marshal(ds)
	if err != nil {
		return nil, fmt.Errorf("daemonset: patch of %s: %w", ds.Name, err)
	}
	var raw map[string]any
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("daemonset: patch of %s: %w", ds.Name, err)
	}
	spec, _ := raw["spec"].(map[string]any)
	template, _ := spec["template"].(map[string]any)
	if template == nil {
		template = map[string]any{}
	}
	template["$patch"] = "replace"
	out, err := json.Marshal(map[string]any{"spec": map[string]any{"template": template}})
	if err != nil {
		return nil, fmt.Errorf("daemonset: patch of %s: %w", ds.Name, err)
	}
	return out, nil
}

// constructHistory sorts the DaemonSet's revisions into the current one
// (its template's, created if missing, renumbered to be the newest) and
// the old ones (kube's constructHistory). Revisions missing the
// controller-revision-hash label get it (their name), duplicates of the
// current one are removed after relabelling their pods.
func (c *Controller) constructHistory(ctx context.Context, a *adoption, sel labels.Selector, pods []*corev1.Pod) (cur *appsv1.ControllerRevision, old []*appsv1.ControllerRevision, err error) {
	ds := a.ds
	revs, err := c.claimRevisions(ctx, a, sel)
	if err != nil {
		return nil, nil, err
	}
	patch, err := templatePatch(ds)
	if err != nil {
		return nil, nil, err
	}
	var current []*appsv1.ControllerRevision
	for _, r := range revs {
		if _, ok := r.Labels[appsv1.DefaultDaemonSetUniqueLabelKey]; !ok {
			upd := r.DeepCopy()
			if upd.Labels == nil {
				upd.Labels = map[string]string{}
			}
			upd.Labels[appsv1.DefaultDaemonSetUniqueLabelKey] = upd.Name
			if r, err = c.client.AppsV1().ControllerRevisions(ds.Namespace).Update(ctx, upd, metav1.UpdateOptions{}); err != nil {
				return nil, nil, fmt.Errorf("daemonset: label revision %s: %w", upd.Name, err)
			}
		}
		if bytes.Equal(patch, r.Data.Raw) {
			current = append(current, r)
		} else {
			old = append(old, r)
		}
	}
	next := history.NextRevision(old)
	if len(current) == 0 {
		cur, err = c.snapshot(ctx, ds, patch, next)
		return cur, old, err
	}
	if cur, err = c.dedupCurrent(ctx, ds, current, pods); err != nil {
		return nil, nil, err
	}
	if cur.Revision < next {
		if cur, err = c.history.Update(ctx, cur, next); err != nil {
			return nil, nil, fmt.Errorf("daemonset: %w", err)
		}
	}
	return cur, old, nil
}

// snapshot creates the revision of ds's template, named after ds and the
// template hash with status.collisionCount (kube's snapshot). A name taken
// by a revision of another template raises collisionCount in status and
// fails the round: the next one tries the next name.
func (c *Controller) snapshot(ctx context.Context, ds *appsv1.DaemonSet, patch []byte, revision int64) (*appsv1.ControllerRevision, error) {
	hash := deployment.ComputeHash(&ds.Spec.Template, ds.Status.CollisionCount)
	lbls := maps.Clone(ds.Spec.Template.Labels)
	if lbls == nil {
		lbls = map[string]string{}
	}
	lbls[appsv1.DefaultDaemonSetUniqueLabelKey] = hash
	rev := &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{
			Name:            history.ControllerRevisionName(ds.Name, hash),
			Namespace:       ds.Namespace,
			Labels:          lbls,
			Annotations:     maps.Clone(ds.Annotations),
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(ds, controllerKind)},
		},
		Data:     runtime.RawExtension{Raw: patch},
		Revision: revision,
	}
	api := c.client.AppsV1().ControllerRevisions(ds.Namespace)
	created, err := api.Create(ctx, rev, metav1.CreateOptions{})
	if err == nil {
		return created, nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("daemonset: create revision %s: %w", rev.Name, err)
	}
	existing, gerr := api.Get(ctx, rev.Name, metav1.GetOptions{})
	if gerr != nil {
		return nil, fmt.Errorf("daemonset: get revision %s: %w", rev.Name, gerr)
	}
	if bytes.Equal(existing.Data.Raw, patch) {
		return existing, nil
	}
	fresh, gerr := c.client.AppsV1().DaemonSets(ds.Namespace).Get(ctx, ds.Name, metav1.GetOptions{})
	if gerr != nil {
		return nil, fmt.Errorf("daemonset: %s/%s: %w", ds.Namespace, ds.Name, gerr)
	}
	if !apiequality.Semantic.DeepEqual(fresh.Status.CollisionCount, ds.Status.CollisionCount) {
		return nil, fmt.Errorf("daemonset: %s/%s: stale collision count, will retry", ds.Namespace, ds.Name)
	}
	n := ptrOr(fresh.Status.CollisionCount, 0) + 1
	fresh.Status.CollisionCount = &n
	if _, uerr := c.client.AppsV1().DaemonSets(ds.Namespace).UpdateStatus(ctx, fresh, metav1.UpdateOptions{}); uerr != nil {
		return nil, fmt.Errorf("daemonset: %s/%s: raise collision count: %w", ds.Namespace, ds.Name, uerr)
	}
	c.log.Info("hash collision, raised collisionCount", "key", ds.Namespace+"/"+ds.Name, "collisionCount", n)
	return nil, fmt.Errorf("daemonset: %s/%s: revision %s: %w", ds.Namespace, ds.Name, rev.Name, err)
}

// dedupCurrent keeps the newest of several revisions of the current
// template, relabels the pods of the others and deletes them (kube's
// dedupCurHistories).
func (c *Controller) dedupCurrent(ctx context.Context, ds *appsv1.DaemonSet, current []*appsv1.ControllerRevision, pods []*corev1.Pod) (*appsv1.ControllerRevision, error) {
	keep := current[0]
	for _, r := range current[1:] {
		if r.Revision >= keep.Revision {
			keep = r
		}
	}
	if len(current) == 1 {
		return keep, nil
	}
	hash := keep.Labels[appsv1.DefaultDaemonSetUniqueLabelKey]
	for _, p := range pods {
		if p.Labels[appsv1.DefaultDaemonSetUniqueLabelKey] == hash {
			continue
		}
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]string{appsv1.DefaultDaemonSetUniqueLabelKey: hash}}})
		if err != nil {
			return nil, fmt.Errorf("daemonset: relabel pod %s: %w", p.Name, err)
		}
		if _, err := c.client.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("daemonset: relabel pod %s: %w", p.Name, err)
		}
	}
	for _, r := range current {
		if r.Name == keep.Name {
			continue
		}
		if err := c.history.Delete(ctx, r); err != nil {
			return nil, fmt.Errorf("daemonset: %w", err)
		}
	}
	return keep, nil
}

// cleanupHistory deletes the oldest old revisions beyond
// spec.revisionHistoryLimit, keeping those some pod still runs (kube's
// cleanupHistory).
func (c *Controller) cleanupHistory(ctx context.Context, ds *appsv1.DaemonSet, old []*appsv1.ControllerRevision, pods []*corev1.Pod) error {
	toKill := len(old) - int(ptrOr(ds.Spec.RevisionHistoryLimit, 10))
	if toKill <= 0 {
		return nil
	}
	live := map[string]bool{}
	for _, p := range pods {
		if h := p.Labels[appsv1.DefaultDaemonSetUniqueLabelKey]; h != "" {
			live[h] = true
		}
	}
	old = slices.Clone(old)
	slices.SortStableFunc(old, func(a, b *appsv1.ControllerRevision) int { return int(a.Revision - b.Revision) })
	for _, r := range old {
		if toKill <= 0 {
			break
		}
		if live[r.Labels[appsv1.DefaultDaemonSetUniqueLabelKey]] {
			continue
		}
		if err := c.history.Delete(ctx, r); err != nil {
			return fmt.Errorf("daemonset: %s/%s: clean up history: %w", ds.Namespace, ds.Name, err)
		}
		toKill--
	}
	return nil
}

func ptrOr[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}
