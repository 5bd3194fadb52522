package replicaset

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
const indexOrphans = "orphans"

func orphanNamespace(pod *corev1.Pod) []string {
	if metav1.GetControllerOfNoCopy(pod) != nil {
		return nil
	}
	return []string{pod.Namespace}
}

// claimPods returns the pods rs controls after this round: the ones it
// controlled and still match sel, and the orphans that match and that it
// adopts now. Controlled pods that stopped matching are released (kube's
// PodControllerRefManager.ClaimPods). A ReplicaSet being deleted neither
// adopts nor releases.
func (c *Controller) claimPods(ctx context.Context, rs *appsv1.ReplicaSet, sel labels.Selector) ([]*corev1.Pod, error) {
	var (
		owned    []*corev1.Pod
		canAdopt *bool // decided on the first orphan, with a fresh read
		errs     []error
	)
	deleting := rs.DeletionTimestamp != nil
	// Only rs's own pods and the orphans can be claimed: pods of other
	// controllers are not even looked at (a namespace with many
	// ReplicaSets would make every round scan them all).
	candidates := c.pods.ByIndex(consumer.IndexOwner, string(rs.UID))
	if !deleting {
		candidates = append(candidates, c.pods.ByIndex(indexOrphans, rs.Namespace)...)
	}
	for _, pod := range candidates {
		matches := !sel.Empty() && sel.Matches(labels.Set(pod.Labels))
		ref := metav1.GetControllerOfNoCopy(pod)
		switch {
		case ref != nil && ref.UID == rs.UID:
			if matches {
				owned = append(owned, pod)
				continue
			}
			if deleting {
				continue
			}
			if err := c.release(ctx, rs, pod); err != nil {
				errs = append(errs, err)
			}
		case ref != nil:
			// Another controller's.
		case !matches || deleting || pod.DeletionTimestamp != nil:
		default:
			if canAdopt == nil {
				ok, err := c.canAdopt(ctx, rs)
				if err != nil {
					return nil, err
				}
				canAdopt = &ok
			}
			if !*canAdopt {
				continue
			}
			adopted, err := c.adopt(ctx, rs, pod)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if adopted {
				owned = append(owned, pod)
			}
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("replicaset: %s/%s: claim pods: %w", rs.Namespace, rs.Name, errors.Join(errs...))
	}
	return owned, nil
}

// canAdopt reads rs from the apiserver, not the cache: an orphan must not
// be adopted by a ReplicaSet that was deleted (or is being deleted, or was
// replaced) since the cache saw it (kube's RecheckDeletionTimestamp).
func (c *Controller) canAdopt(ctx context.Context, rs *appsv1.ReplicaSet) (bool, error) {
	fresh, err := c.client.AppsV1().ReplicaSets(rs.Namespace).Get(ctx, rs.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("replicaset: %s/%s: recheck before adoption: %w", rs.Namespace, rs.Name, err)
	}
	return fresh.UID == rs.UID && fresh.DeletionTimestamp == nil, nil
}

// adopt adds rs as pod's controller. The patch names the pod's UID, so it
// fails on a pod replaced under the same name. false (no error) means the
// pod is gone.
func (c *Controller) adopt(ctx context.Context, rs *appsv1.ReplicaSet, pod *corev1.Pod) (bool, error) {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"ownerReferences": []metav1.OwnerReference{controllerRef(rs)},
		"uid":             pod.UID,
	}})
	if err != nil {
		return false, fmt.Errorf("adopt pod %s: %w", pod.Name, err)
	}
	_, err = c.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("adopt pod %s: %w", pod.Name, err)
	}
	c.log.Info("adopted pod", "key", rs.Namespace+"/"+rs.Name, "pod", pod.Name)
	return true, nil
}

// release removes rs's ownerReference from pod. A pod that is gone or was
// replaced (Invalid: its UID changed) needs no release.
func (c *Controller) release(ctx context.Context, rs *appsv1.ReplicaSet, pod *corev1.Pod) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"ownerReferences": []map[string]any{{"$patch": "delete", "uid": rs.UID}},
		"uid":             pod.UID,
	}})
	if err != nil {
		return fmt.Errorf("release pod %s: %w", pod.Name, err)
	}
	_, err = c.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) || apierrors.IsInvalid(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("release pod %s: %w", pod.Name, err)
	}
	c.log.Info("released pod", "key", rs.Namespace+"/"+rs.Name, "pod", pod.Name)
	return nil
}
