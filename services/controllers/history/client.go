package history

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/cairn-dev/cairn/events/consumer"
)

// Resource is the ControllerRevisions' resource.
var Resource = appsv1.SchemeGroupVersion.WithResource("controllerrevisions")

// CacheFor is m's shared ControllerRevision cache, Partitioned: a
// revision is on the partition of its controller, the same as the parent
// that owns it, and orphans are on every partition. Controllers of
// different kinds asking through CacheFor share one cache.
func CacheFor(m *consumer.Manager) (*consumer.Cache[*appsv1.ControllerRevision], error) {
	c, err := consumer.CacheFor[*appsv1.ControllerRevision](m, Resource, consumer.Partitioned())
	if err != nil {
		return nil, fmt.Errorf("history: cache: %w", err)
	}
	return c, nil
}

// History is Interface over a client and a revision cache.
type History struct {
	client kubernetes.Interface
	revs   *consumer.Cache[*appsv1.ControllerRevision]
}

var _ Interface = (*History)(nil)

// New is the history that lists from revs and writes with client.
func New(client kubernetes.Interface, revs *consumer.Cache[*appsv1.ControllerRevision]) *History {
	return &History{client: client, revs: revs}
}

// List implements Interface.
func (h *History) List(parent metav1.Object, selector labels.Selector) []*appsv1.ControllerRevision {
	var owned []*appsv1.ControllerRevision
	for _, r := range h.revs.ByIndex(consumer.IndexNamespace, parent.GetNamespace()) {
		if !selector.Matches(labels.Set(r.Labels)) {
			continue
		}
		if ref := metav1.GetControllerOfNoCopy(r); ref == nil || ref.UID == parent.GetUID() {
			owned = append(owned, r)
		}
	}
	return owned
}

// maxCollisions bounds Create's renames: each one needs a revision of
// other Data already holding the name, so more than a few means a loop.
const maxCollisions = 100

// Create implements Interface.
func (h *History) Create(ctx context.Context, parent metav1.Object, revision *appsv1.ControllerRevision, collisionCount *int32) (*appsv1.ControllerRevision, error) {
	if collisionCount == nil {
		return nil, ErrNilCollisionCount
	}
	api := h.client.AppsV1().ControllerRevisions(parent.GetNamespace())
	clone := revision.DeepCopy()
	clone.Namespace = parent.GetNamespace()
	for range maxCollisions {
		hash := HashControllerRevision(revision, collisionCount)
		clone.Name = ControllerRevisionName(parent.GetName(), hash)
		created, err := api.Create(ctx, clone, metav1.CreateOptions{})
		if !apierrors.IsAlreadyExists(err) {
			if err != nil {
				return nil, fmt.Errorf("history: create %s: %w", clone.Name, err)
			}
			return created, nil
		}
		exists, err := api.Get(ctx, clone.Name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("history: create %s: %w", clone.Name, err)
		}
		if bytes.Equal(exists.Data.Raw, clone.Data.Raw) {
			return exists, nil
		}
		*collisionCount++
	}
	return nil, fmt.Errorf("history: create revision of %s: %d name collisions", parent.GetName(), maxCollisions)
}

// Update implements Interface. A conflict is retried on a fresh read.
func (h *History) Update(ctx context.Context, revision *appsv1.ControllerRevision, newRevision int64) (*appsv1.ControllerRevision, error) {
	api := h.client.AppsV1().ControllerRevisions(revision.Namespace)
	clone := revision.DeepCopy()
	for attempt := 0; ; attempt++ {
		if clone.Revision == newRevision {
			return clone, nil
		}
		clone.Revision = newRevision
		updated, err := api.Update(ctx, clone, metav1.UpdateOptions{})
		if err == nil {
			return updated, nil
		}
		if !apierrors.IsConflict(err) || attempt >= 4 {
			return nil, fmt.Errorf("history: update %s: %w", revision.Name, err)
		}
		fresh, gerr := api.Get(ctx, revision.Name, metav1.GetOptions{})
		if gerr != nil {
			return nil, fmt.Errorf("history: update %s: %w", revision.Name, gerr)
		}
		clone = fresh
	}
}

// Delete implements Interface. The delete is preconditioned on the UID, so
// a revision recreated under the same name survives.
func (h *History) Delete(ctx context.Context, revision *appsv1.ControllerRevision) error {
	err := h.client.AppsV1().ControllerRevisions(revision.Namespace).Delete(ctx, revision.Name,
		metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &revision.UID}})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("history: delete %s: %w", revision.Name, err)
	}
	return nil
}

// Adopt implements Interface.
func (h *History) Adopt(ctx context.Context, parent metav1.Object, parentKind schema.GroupVersionKind, revision *appsv1.ControllerRevision) (*appsv1.ControllerRevision, error) {
	if owner := metav1.GetControllerOfNoCopy(revision); owner != nil {
		return nil, fmt.Errorf("adopt %s owned by %s %s: %w", revision.Name, owner.Kind, owner.Name, ErrOwned)
	}
	yes := true
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"ownerReferences": []metav1.OwnerReference{{
			APIVersion: parentKind.GroupVersion().String(), Kind: parentKind.Kind,
			Name: parent.GetName(), UID: parent.GetUID(), Controller: &yes, BlockOwnerDeletion: &yes,
		}},
		"uid": revision.UID,
	}})
	if err != nil {
		return nil, fmt.Errorf("history: adopt %s: %w", revision.Name, err)
	}
	out, err := h.client.AppsV1().ControllerRevisions(parent.GetNamespace()).Patch(ctx, revision.Name,
		types.StrategicMergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return nil, fmt.Errorf("history: adopt %s: %w", revision.Name, err)
	}
	return out, nil
}

// Release implements Interface.
func (h *History) Release(ctx context.Context, parent metav1.Object, revision *appsv1.ControllerRevision) (*appsv1.ControllerRevision, error) {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"ownerReferences": []map[string]any{{"$patch": "delete", "uid": parent.GetUID()}},
		"uid":             revision.UID,
	}})
	if err != nil {
		return nil, fmt.Errorf("history: release %s: %w", revision.Name, err)
	}
	out, err := h.client.AppsV1().ControllerRevisions(revision.Namespace).Patch(ctx, revision.Name,
		types.StrategicMergePatchType, patch, metav1.PatchOptions{})
	switch {
	case apierrors.IsNotFound(err), apierrors.IsInvalid(err):
		// Gone, replaced (UID mismatch) or no longer parent's.
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("history: release %s: %w", revision.Name, err)
	}
	return out, nil
}
