package statefulset

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

// indexOrphans indexes pods without a controller by namespace.
const indexOrphans = "statefulset-orphans"

func orphanNamespace(pod *corev1.Pod) []string {
	if metav1.GetControllerOfNoCopy(pod) != nil {
		return nil
	}
	return []string{pod.Namespace}
}

// podsOf is the pods set controls after this round (kube's
// getPodsForStatefulSet with the PodControllerRefManager): its own pods
// that still match its selector and are named as its members, plus the
// orphans of that kind, adopted now; its pods that no longer match are
// released. A set being deleted neither adopts nor releases.
func (c *Controller) podsOf(ctx context.Context, set *appsv1.StatefulSet, sel labels.Selector) ([]*corev1.Pod, error) {
	deleting := set.DeletionTimestamp != nil
	candidates := c.pods.ByIndex(consumer.IndexOwner, string(set.UID))
	if !deleting {
		candidates = append(candidates, c.pods.ByIndex(indexOrphans, set.Namespace)...)
	}
	var (
		owned   []*corev1.Pod
		adopter *bool
		errs    []error
	)
	for _, pod := range candidates {
		match := !sel.Empty() && sel.Matches(labels.Set(pod.Labels)) && isMemberOf(set, pod)
		ref := metav1.GetControllerOfNoCopy(pod)
		switch {
		case ref != nil && ref.UID == set.UID && match:
			owned = append(owned, pod)
		case ref != nil && ref.UID == set.UID:
			if !deleting {
				errs = append(errs, c.releasePod(ctx, set, pod))
			}
		case ref != nil, !match, deleting, pod.DeletionTimestamp != nil:
			// Another controller's, or not ours to take.
		default:
			if adopter == nil {
				ok, err := c.canAdopt(ctx, set)
				if err != nil {
					return nil, err
				}
				adopter = &ok
			}
			if !*adopter {
				continue
			}
			adopted, err := c.adoptPod(ctx, set, pod)
			errs = append(errs, err)
			if adopted {
				owned = append(owned, pod)
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("statefulset: %s/%s: claim pods: %w", set.Namespace, set.Name, err)
	}
	return owned, nil
}

// canAdopt reads set from the apiserver: nothing is adopted by a set
// deleted, being deleted or replaced since the cache saw it (kube's
// RecheckDeletionTimestamp).
func (c *Controller) canAdopt(ctx context.Context, set *appsv1.StatefulSet) (bool, error) {
	fresh, err := c.client.AppsV1().StatefulSets(set.Namespace).Get(ctx, set.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("statefulset: %s/%s: recheck before adoption: %w", set.Namespace, set.Name, err)
	}
	return fresh.UID == set.UID && fresh.DeletionTimestamp == nil, nil
}

// patchPodOwners applies an ownerReferences patch to pod, naming its UID
// so that a pod replaced under the same name is left alone. ok is false
// when the pod is gone or was replaced.
func (c *Controller) patchPodOwners(ctx context.Context, pod *corev1.Pod, refs any) (ok bool, err error) {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"ownerReferences": refs, "uid": pod.UID}})
	if err != nil {
		return false, err
	}
	_, err = c.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) || apierrors.IsInvalid(err) {
		return false, nil
	}
	return err == nil, err
}

func (c *Controller) adoptPod(ctx context.Context, set *appsv1.StatefulSet, pod *corev1.Pod) (bool, error) {
	ok, err := c.patchPodOwners(ctx, pod, []metav1.OwnerReference{*metav1.NewControllerRef(set, controllerKind)})
	if err != nil {
		return false, fmt.Errorf("adopt pod %s: %w", pod.Name, err)
	}
	if ok {
		c.log.Info("adopted pod", "key", consumer.KeyOf(set), "pod", pod.Name)
	}
	return ok, nil
}

func (c *Controller) releasePod(ctx context.Context, set *appsv1.StatefulSet, pod *corev1.Pod) error {
	ok, err := c.patchPodOwners(ctx, pod, []map[string]any{{"$patch": "delete", "uid": set.UID}})
	if err != nil {
		return fmt.Errorf("release pod %s: %w", pod.Name, err)
	}
	if ok {
		c.log.Info("released pod", "key", consumer.KeyOf(set), "pod", pod.Name)
	}
	return nil
}
