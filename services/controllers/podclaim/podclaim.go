package podclaim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/cairn-dev/cairn/events/consumer"
)

// OrphanIndex indexes pods without a controller by namespace; register
// OrphanIndexers on the pod cache and list ByIndex(OrphanIndex, ns).
const OrphanIndex = "orphans"

// OrphanIndexers are the indexes Claim's callers need on a pod cache.
func OrphanIndexers() map[string]consumer.IndexFunc[*corev1.Pod] {
	return map[string]consumer.IndexFunc[*corev1.Pod]{OrphanIndex: orphanNamespace}
}

func orphanNamespace(pod *corev1.Pod) []string {
	if metav1.GetControllerOfNoCopy(pod) != nil {
		return nil
	}
	return []string{pod.Namespace}
}

// Owner is the controller that claims pods.
type Owner struct {
	Object metav1.Object
	Kind   schema.GroupVersionKind
	// Selector must match a pod it keeps or adopts; an empty one matches
	// none.
	Selector labels.Selector
	// Filter, if set, must also hold (a StatefulSet's pods carry its
	// name).
	Filter func(*corev1.Pod) bool
	// CanAdopt is asked once, before the first adoption.
	CanAdopt func(ctx context.Context) (bool, error)
}

// Claimer adopts and releases pods with a client.
type Claimer struct {
	Client kubernetes.Interface
	Log    *slog.Logger
}

// Claim returns the pods o controls after this round, out of candidates:
// its own that still match, and the orphans that match and that it
// adopted. Errors of single pods are joined; the pods claimed are returned
// only without error.
func (c Claimer) Claim(ctx context.Context, o Owner, candidates []*corev1.Pod) ([]*corev1.Pod, error) {
	deleting := o.Object.GetDeletionTimestamp() != nil
	var (
		owned    []*corev1.Pod
		canAdopt *bool
		errs     []error
	)
	for _, pod := range candidates {
		matches := !o.Selector.Empty() && o.Selector.Matches(labels.Set(pod.Labels)) && (o.Filter == nil || o.Filter(pod))
		ref := metav1.GetControllerOfNoCopy(pod)
		switch {
		case ref != nil && ref.UID == o.Object.GetUID():
			if matches {
				owned = append(owned, pod)
			} else if !deleting {
				errs = append(errs, c.Release(ctx, o, pod))
			}
		case ref != nil, !matches, deleting, pod.DeletionTimestamp != nil:
			// Another controller's, or not o's to take.
		default:
			if canAdopt == nil {
				ok, err := o.CanAdopt(ctx)
				if err != nil {
					return nil, err
				}
				canAdopt = &ok
			}
			if !*canAdopt {
				continue
			}
			adopted, err := c.Adopt(ctx, o, pod)
			errs = append(errs, err)
			if adopted {
				owned = append(owned, pod)
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return owned, nil
}

// Adopt makes o pod's controller. false (no error) means the pod is gone
// or was replaced.
func (c Claimer) Adopt(ctx context.Context, o Owner, pod *corev1.Pod) (bool, error) {
	ok, err := c.patch(ctx, pod, []metav1.OwnerReference{*metav1.NewControllerRef(o.Object, o.Kind)})
	if err != nil {
		return false, fmt.Errorf("adopt pod %s: %w", pod.Name, err)
	}
	if ok {
		c.Log.Info("adopted pod", "key", consumer.KeyOf(o.Object), "pod", pod.Name)
	}
	return ok, nil
}

// Release removes o's reference from pod; a pod gone or replaced needs
// none.
func (c Claimer) Release(ctx context.Context, o Owner, pod *corev1.Pod) error {
	ok, err := c.patch(ctx, pod, []map[string]any{{"$patch": "delete", "uid": o.Object.GetUID()}})
	if err != nil {
		return fmt.Errorf("release pod %s: %w", pod.Name, err)
	}
	if ok {
		c.Log.Info("released pod", "key", consumer.KeyOf(o.Object), "pod", pod.Name)
	}
	return nil
}

// patch applies an ownerReferences strategic merge patch naming pod's
// UID; ok is false when the pod is gone (NotFound) or was replaced
// (Invalid: the UID differs).
func (c Claimer) patch(ctx context.Context, pod *corev1.Pod, refs any) (ok bool, err error) {
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"ownerReferences": refs, "uid": pod.UID}})
	if err != nil {
		return false, err
	}
	_, err = c.Client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, body, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) || apierrors.IsInvalid(err) {
		return false, nil
	}
	return err == nil, err
}

// Recheck is a CanAdopt for o from a live read (get): o may adopt if it
// still exists with its UID and is not being deleted (kube's
// RecheckDeletionTimestamp). A cache may still show an owner that was
// deleted or replaced; an orphan must not be adopted by it.
func Recheck(o metav1.Object, get func(ctx context.Context) (metav1.Object, error)) func(ctx context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		fresh, err := get(ctx)
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("recheck %s before adoption: %w", consumer.KeyOf(o), err)
		}
		return fresh.GetUID() == o.GetUID() && fresh.GetDeletionTimestamp() == nil, nil
	}
}
