package namespace

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// content is what a deletion round found.
type content struct {
	// remaining counts the objects left, by resource ("configmaps",
	// "replicasets.apps").
	remaining map[string]int
	// finalizers counts the objects left that carry each finalizer.
	finalizers map[string]int
	// discoveryErr, parseErr and deleteErr feed the failure conditions.
	discoveryErr, parseErr, deleteErr error
}

func (c *content) empty() bool { return len(c.remaining) == 0 }

// deleteContent deletes every namespaced object in ns and reports what is
// left. The error joins every failure; left is meaningful even then.
func (c *Controller) deleteContent(ctx context.Context, ns string) (*content, error) {
	left := &content{remaining: map[string]int{}, finalizers: map[string]int{}}
	resources, err := c.namespacedResources(left)
	if err != nil {
		return left, err
	}
	var errs []error
	for _, r := range resources {
		if err := c.deleteResource(ctx, ns, r, left); err != nil {
			errs = append(errs, err)
		}
	}
	left.deleteErr = errors.Join(errs...)
	return left, errors.Join(left.discoveryErr, left.parseErr, left.deleteErr)
}

// apiResource is a namespaced resource to empty.
type apiResource struct {
	gvr        gvr
	collection bool // deletecollection is served
}

// namespacedResources lists, through discovery, the namespaced resources
// that can be listed and deleted. A partial discovery failure is recorded
// in left and the resources found are still returned (kube does the same:
// delete what it can, and fail the round).
func (c *Controller) namespacedResources(left *content) ([]apiResource, error) {
	lists, err := c.disco.ServerPreferredNamespacedResources()
	if err != nil {
		left.discoveryErr = err
		if len(lists) == 0 {
			return nil, fmt.Errorf("discovery: %w", err)
		}
	}
	var out []apiResource
	var perrs []error
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			perrs = append(perrs, err)
			continue
		}
		for _, ar := range l.APIResources {
			if strings.Contains(ar.Name, "/") || !slices.Contains(ar.Verbs, "list") {
				continue
			}
			collection := slices.Contains(ar.Verbs, "deletecollection")
			if !collection && !slices.Contains(ar.Verbs, "delete") {
				continue
			}
			out = append(out, apiResource{gvr: gv.WithResource(ar.Name), collection: collection})
		}
	}
	left.parseErr = errors.Join(perrs...)
	return out, nil
}

// deleteResource deletes r's objects in ns, then lists what is left into
// left.
func (c *Controller) deleteResource(ctx context.Context, ns string, r apiResource, left *content) error {
	cl := c.dynamic.Resource(r.gvr).Namespace(ns)
	background := metav1.DeletePropagationBackground
	opts := metav1.DeleteOptions{PropagationPolicy: &background}
	eachItem := !r.collection
	if r.collection {
		err := cl.DeleteCollection(ctx, opts, metav1.ListOptions{})
		switch {
		case apierrors.IsMethodNotSupported(err) || apierrors.IsNotFound(err):
			eachItem = true
		case err != nil:
			return fmt.Errorf("delete %s: %w", r.gvr.GroupResource(), err)
		}
	}
	list, err := cl.List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list %s: %w", r.gvr.GroupResource(), err)
	}
	var errs []error
	for i := range list.Items {
		it := &list.Items[i]
		if eachItem && it.GetDeletionTimestamp() == nil {
			if err := cl.Delete(ctx, it.GetName(), opts); err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("delete %s %s: %w", r.gvr.GroupResource(), it.GetName(), err))
			}
		}
		// What was just deleted one by one may still be there (grace,
		// finalizers): count everything listed; the next round tells.
		left.remaining[r.gvr.GroupResource().String()]++
		for _, f := range it.GetFinalizers() {
			left.finalizers[f]++
		}
	}
	return errors.Join(errs...)
}

// remainingMessage is kube's NamespaceContentRemaining message.
func (c *content) remainingMessage() string {
	parts := make([]string, 0, len(c.remaining))
	for _, r := range sortedKeys(c.remaining) {
		parts = append(parts, fmt.Sprintf("%s has %d resource instances", r, c.remaining[r]))
	}
	return "Some resources are remaining: " + strings.Join(parts, ", ")
}

// finalizersMessage is kube's NamespaceFinalizersRemaining message.
func (c *content) finalizersMessage() string {
	parts := make([]string, 0, len(c.finalizers))
	for _, f := range sortedKeys(c.finalizers) {
		parts = append(parts, fmt.Sprintf("%s in %d resource instances", f, c.finalizers[f]))
	}
	return "Some content in the namespace has finalizers remaining: " + strings.Join(parts, ", ")
}

func sortedKeys(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// conditions are kube's five deletion conditions for a round's result.
func (c *content) conditions() []corev1.NamespaceCondition {
	cond := func(t corev1.NamespaceConditionType, failed bool, okReason, failReason, msg string) corev1.NamespaceCondition {
		if !failed {
			return corev1.NamespaceCondition{Type: t, Status: corev1.ConditionFalse, Reason: okReason}
		}
		return corev1.NamespaceCondition{Type: t, Status: corev1.ConditionTrue, Reason: failReason, Message: msg}
	}
	errMsg := func(err error) string {
		if err == nil {
			return ""
		}
		return err.Error()
	}
	return []corev1.NamespaceCondition{
		cond(corev1.NamespaceDeletionDiscoveryFailure, c.discoveryErr != nil, "ResourcesDiscovered", "DiscoveryFailed", "Discovery failed for some groups: "+errMsg(c.discoveryErr)),
		cond(corev1.NamespaceDeletionGVParsingFailure, c.parseErr != nil, "ParsedGroupVersions", "GroupVersionParsingFailed", errMsg(c.parseErr)),
		cond(corev1.NamespaceDeletionContentFailure, c.deleteErr != nil, "ContentDeleted", "ContentDeletionFailed", "Failed to delete all resource types: "+errMsg(c.deleteErr)),
		cond(corev1.NamespaceContentRemaining, len(c.remaining) > 0, "ContentRemoved", "SomeResourcesRemain", c.remainingMessage()),
		cond(corev1.NamespaceFinalizersRemaining, len(c.finalizers) > 0, "ContentHasNoFinalizers", "SomeFinalizersRemain", c.finalizersMessage()),
	}
}

// setConditions writes the round's conditions to the namespace status if
// they changed; a condition's LastTransitionTime moves only when its status
// does.
func (c *Controller) setConditions(ctx context.Context, ns *corev1.Namespace, left *content) error {
	want := ns.DeepCopy()
	now := metav1.NewTime(c.cfg.Clock().Truncate(1e9))
	changed := want.Status.Phase != corev1.NamespaceTerminating
	want.Status.Phase = corev1.NamespaceTerminating
	for _, nc := range left.conditions() {
		i := slices.IndexFunc(want.Status.Conditions, func(x corev1.NamespaceCondition) bool { return x.Type == nc.Type })
		if i < 0 {
			nc.LastTransitionTime = now
			want.Status.Conditions = append(want.Status.Conditions, nc)
			changed = true
			continue
		}
		old := want.Status.Conditions[i]
		if old.Status == nc.Status && old.Reason == nc.Reason && old.Message == nc.Message {
			continue
		}
		nc.LastTransitionTime = old.LastTransitionTime
		if old.Status != nc.Status {
			nc.LastTransitionTime = now
		}
		want.Status.Conditions[i] = nc
		changed = true
	}
	if !changed {
		return nil
	}
	_, err := c.client.CoreV1().Namespaces().UpdateStatus(ctx, want, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) {
		// Written by someone else meanwhile: the next round rewrites it.
		return nil
	}
	return err
}
