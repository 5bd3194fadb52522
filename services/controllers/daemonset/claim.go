package daemonset

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cairn-dev/cairn/events/consumer"
)

// adoption decides, once per round and with a fresh read, whether the
// DaemonSet may adopt orphans: not if it was deleted, is being deleted or
// was replaced since the cache saw it (kube's RecheckDeletionTimestamp).
type adoption struct {
	c  *Controller
	ds *appsv1.DaemonSet
	decided,
	ok bool
}

func (a *adoption) allowed(ctx context.Context) (bool, error) {
	if a.decided {
		return a.ok, nil
	}
	fresh, err := a.c.client.AppsV1().DaemonSets(a.ds.Namespace).Get(ctx, a.ds.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return false, fmt.Errorf("recheck before adoption: %w", err)
	default:
		a.ok = fresh.UID == a.ds.UID && fresh.DeletionTimestamp == nil
	}
	a.decided = true
	return a.ok, nil
}

// claim returns the objects the DaemonSet controls after this round, of
// owned (those it controls) and orphans (those nobody controls): owned
// ones still matching sel, and matching orphans it adopts now; owned ones
// that stopped matching are released (kube's ControllerRefManager). A
// DaemonSet being deleted neither adopts nor releases. adopt reports false
// for an object that is gone.
func claim[T metav1.Object](ctx context.Context, a *adoption, sel labels.Selector, owned, orphans []T,
	adopt func(context.Context, T) (bool, error), release func(context.Context, T) error) ([]T, error) {
	var (
		out  []T
		errs []error
	)
	deleting := a.ds.DeletionTimestamp != nil
	for _, o := range owned {
		if sel.Matches(labels.Set(o.GetLabels())) {
			out = append(out, o)
			continue
		}
		if deleting {
			continue
		}
		if err := release(ctx, o); err != nil {
			errs = append(errs, err)
		}
	}
	if deleting {
		return out, errors.Join(errs...)
	}
	for _, o := range orphans {
		if o.GetDeletionTimestamp() != nil || !sel.Matches(labels.Set(o.GetLabels())) {
			continue
		}
		ok, err := a.allowed(ctx)
		if err != nil {
			return nil, err
		}
		if !ok {
			break
		}
		adopted, err := adopt(ctx, o)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if adopted {
			out = append(out, o)
		}
	}
	return out, errors.Join(errs...)
}

// claimPods is the pods the DaemonSet controls (kube's getDaemonPods).
func (c *Controller) claimPods(ctx context.Context, a *adoption, sel labels.Selector) ([]*corev1.Pod, error) {
	ds := a.ds
	pods, err := claim(ctx, a, sel, c.pods.ByIndex(consumer.IndexOwner, string(ds.UID)), c.pods.ByIndex(indexOrphans, ds.Namespace),
		func(ctx context.Context, p *corev1.Pod) (bool, error) { return c.patchPodOwner(ctx, ds, p, true) },
		func(ctx context.Context, p *corev1.Pod) error {
			_, err := c.patchPodOwner(ctx, ds, p, false)
			return err
		})
	if err != nil {
		return nil, fmt.Errorf("daemonset: %s/%s: claim pods: %w", ds.Namespace, ds.Name, err)
	}
	return pods, nil
}

// claimRevisions is the ControllerRevisions the DaemonSet controls
// (kube's controlledHistories).
func (c *Controller) claimRevisions(ctx context.Context, a *adoption, sel labels.Selector) ([]*appsv1.ControllerRevision, error) {
	ds := a.ds
	var orphans []*appsv1.ControllerRevision
	for _, r := range c.history.List(ds, sel) {
		if metav1.GetControllerOfNoCopy(r) == nil {
			orphans = append(orphans, r)
		}
	}
	revs, err := claim(ctx, a, sel, c.revs.ByIndex(consumer.IndexOwner, string(ds.UID)), orphans,
		func(ctx context.Context, r *appsv1.ControllerRevision) (bool, error) {
			_, err := c.history.Adopt(ctx, ds, controllerKind, r)
			if apierrors.IsNotFound(err) {
				return false, nil
			}
			return err == nil, err
		},
		func(ctx context.Context, r *appsv1.ControllerRevision) error {
			_, err := c.history.Release(ctx, ds, r)
			return err
		})
	if err != nil {
		return nil, fmt.Errorf("daemonset: %s/%s: claim revisions: %w", ds.Namespace, ds.Name, err)
	}
	return revs, nil
}

// patchPodOwner adds (adopt) or removes ds as pod's controller with a
// strategic merge patch naming pod's UID, so a pod replaced under the same
// name is left alone. It reports false for a pod that is gone.
func (c *Controller) patchPodOwner(ctx context.Context, ds *appsv1.DaemonSet, pod *corev1.Pod, adopt bool) (bool, error) {
	var refs any = []map[string]any{{"$patch": "delete", "uid": ds.UID}}
	verb := "release"
	if adopt {
		refs, verb = []metav1.OwnerReference{*metav1.NewControllerRef(ds, controllerKind)}, "adopt"
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"ownerReferences": refs, "uid": pod.UID}})
	if err != nil {
		return false, fmt.Errorf("%s pod %s: %w", verb, pod.Name, err)
	}
	_, err = c.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
	switch {
	case apierrors.IsNotFound(err), !adopt && apierrors.IsInvalid(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("%s pod %s: %w", verb, pod.Name, err)
	}
	c.log.Info("patched pod owner", "action", verb, "key", ds.Namespace+"/"+ds.Name, "pod", pod.Name)
	return true, nil
}
