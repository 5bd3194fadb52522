package gc

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/retry"

	"github.com/cairn-dev/cairn/events/consumer"
)

// reconciler collects the objects of one resource.
type reconciler struct {
	c *Controller
	r *resource
}

// Reconcile looks at one object: an owner being deleted with a GC
// finalizer gets its dependents orphaned or deleted; a dependent whose
// owners are gone (or all wait for their dependents) is deleted.
func (rc reconciler) Reconcile(ctx context.Context, req consumer.Request) (consumer.Result, error) {
	ns, name := req.NamespaceName()
	obj, ok := rc.r.cache.Get(ns, name)
	if !ok {
		return consumer.Result{}, nil
	}
	var err error
	var res consumer.Result
	switch {
	case obj.GetDeletionTimestamp() != nil && hasFinalizer(obj, metav1.FinalizerOrphanDependents):
		err = rc.c.orphanDependents(ctx, rc.r, obj)
	case deletingDependents(obj):
		res.RequeueAfter, err = rc.c.processDeletingDependents(ctx, rc.r, obj)
	case obj.GetDeletionTimestamp() != nil:
		// Being deleted already, by someone else's decision.
	case len(obj.GetOwnerReferences()) > 0:
		err = rc.c.attemptToDelete(ctx, rc.r, obj)
	}
	if err != nil {
		return consumer.Result{}, fmt.Errorf("gc: %s %s: %w", rc.r.gvr.GroupResource(), req.Key, err)
	}
	return res, nil
}

// owners sorts a dependent's owner references, as kube's classifyReferences.
type owners struct {
	solid    []metav1.OwnerReference // exist and are not waiting for dependents
	dangling []metav1.OwnerReference // confirmed absent (or replaced: other UID)
	waiting  []metav1.OwnerReference // being deleted in the foreground
}

// classify sorts obj's owners. The cache answers for owners it holds with
// the right UID; any other owner is read from the apiserver, so a lagging
// cache never makes a live owner look absent.
func (c *Controller) classify(ctx context.Context, obj metav1.Object) (owners, error) {
	var o owners
	for _, ref := range obj.GetOwnerReferences() {
		if c.absent.has(ref.UID) {
			o.dangling = append(o.dangling, ref)
			continue
		}
		r, ns, ok := c.ownerResource(obj, ref)
		if !ok {
			if r != nil {
				// A namespaced owner of a cluster-scoped object cannot
				// exist: kube treats it as absent.
				o.dangling = append(o.dangling, ref)
				continue
			}
			return o, fmt.Errorf("owner %s %s: unknown kind %s", ref.APIVersion, ref.Name, ref.Kind)
		}
		var owner metav1.Object
		cached, ok := r.cache.Get(ns, ref.Name)
		if ok {
			owner = cached
		}
		if !ok || owner.GetUID() != ref.UID {
			live, err := c.client.Resource(r.gvr).Namespace(ns).Get(ctx, ref.Name, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
				live = nil
			case err != nil:
				return o, fmt.Errorf("get owner %s %s: %w", ref.Kind, ref.Name, err)
			}
			if live == nil || live.GetUID() != ref.UID {
				c.absent.add(ref.UID)
				o.dangling = append(o.dangling, ref)
				continue
			}
			owner = live
		}
		if deletingDependents(owner) {
			o.waiting = append(o.waiting, ref)
		} else {
			o.solid = append(o.solid, ref)
		}
	}
	return o, nil
}

// attemptToDelete is kube's attemptToDeleteItem for a dependent that is not
// being deleted: delete it if no owner holds it, else drop the references
// to owners that are gone or waiting.
func (c *Controller) attemptToDelete(ctx context.Context, r *resource, obj metav1.Object) error {
	o, err := c.classify(ctx, obj)
	if err != nil {
		return err
	}
	if len(o.dangling) == 0 && len(o.waiting) == 0 {
		return nil
	}
	// Something is to be done: decide again on the object as it is now,
	// not as the cache has it (its references may have changed).
	live, err := c.iface(r, obj).Get(ctx, obj.GetName(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get: %w", err)
	}
	if live.GetUID() != obj.GetUID() || live.GetDeletionTimestamp() != nil || len(live.GetOwnerReferences()) == 0 {
		return nil
	}
	obj = live
	if o, err = c.classify(ctx, obj); err != nil {
		return err
	}
	subtree := false
	if len(o.solid) == 0 && len(o.waiting) > 0 {
		if subtree, err = c.hasDependentsNow(ctx, obj); err != nil {
			return err
		}
	}
	switch {
	case len(o.solid) > 0:
		if len(o.dangling) == 0 && len(o.waiting) == 0 {
			return nil
		}
		drop := map[types.UID]bool{}
		for _, ref := range append(o.dangling, o.waiting...) {
			drop[ref.UID] = true
		}
		return c.removeRefs(ctx, r, obj, drop)
	case subtree:
		// Its own dependents must go first: delete it in the foreground
		// too, so the waiting owner waits for the whole subtree.
		return c.deleteObject(ctx, r, obj, metav1.DeletePropagationForeground)
	default:
		policy := metav1.DeletePropagationBackground
		switch {
		case hasFinalizer(obj, metav1.FinalizerOrphanDependents):
			policy = metav1.DeletePropagationOrphan
		case hasFinalizer(obj, metav1.FinalizerDeleteDependents):
			policy = metav1.DeletePropagationForeground
		}
		return c.deleteObject(ctx, r, obj, policy)
	}
}

// processDeletingDependents waits, for an owner deleted in the foreground,
// until no dependent blocks it, then removes the finalizer. The changes of
// the blocking dependents queue the owner again, except those this replica
// does not follow (a partial cache's): then it asks to look again after
// partialPoll.
func (c *Controller) processDeletingDependents(ctx context.Context, r *resource, owner metav1.Object) (time.Duration, error) {
	blocking, poll, err := c.blockingDependents(ctx, owner)
	if err != nil || blocking > 0 {
		return poll, err
	}
	// None is seen, but a dependent created just before its owner was
	// deleted may not have reached its cache yet (each cache follows its
	// own resource): look again once every cache holds what the log holds.
	if err := c.catchUp(ctx); err != nil {
		return 0, err
	}
	if blocking, poll, err = c.blockingDependents(ctx, owner); err != nil || blocking > 0 {
		return poll, err
	}
	return 0, c.removeFinalizer(ctx, r, owner, metav1.FinalizerDeleteDependents)
}

// blockingDependents counts owner's dependents whose reference blocks its
// deletion, and queues those not yet being deleted. poll is partialPoll if
// some are in a partial cache (their changes do not queue the owner).
func (c *Controller) blockingDependents(ctx context.Context, owner metav1.Object) (blocking int, poll time.Duration, err error) {
	for _, dr := range c.all() {
		deps, err := c.dependents(ctx, dr, owner)
		if err != nil {
			return 0, 0, err
		}
		for _, d := range deps {
			if !blocks(d, owner.GetUID()) {
				continue
			}
			blocking++
			if dr.cache.Partial() {
				poll = partialPoll
			}
			if !deletingDependents(d) {
				// The queue checks Owns again before the reconcile.
				dr.ctrl.Queue().Add(consumer.KeyOf(d), consumer.CauseFrom(ctx))
			}
		}
	}
	return blocking, poll, nil
}

// partialPoll is how often an owner waiting for dependents that this
// replica does not follow looks again.
const partialPoll = time.Second

// blocks: d's reference to owner has blockOwnerDeletion.
func blocks(d metav1.Object, owner types.UID) bool {
	for _, ref := range d.GetOwnerReferences() {
		if ref.UID == owner && ref.BlockOwnerDeletion != nil && *ref.BlockOwnerDeletion {
			return true
		}
	}
	return false
}

// orphanDependents removes the references to owner from all its dependents,
// then the "orphan" finalizer from owner. It first lets every cache catch
// up with the log: a dependent missed would be collected once its owner is
// gone.
func (c *Controller) orphanDependents(ctx context.Context, r *resource, owner metav1.Object) error {
	if err := c.catchUp(ctx); err != nil {
		return err
	}
	drop := map[types.UID]bool{owner.GetUID(): true}
	var errs []error
	for _, dr := range c.all() {
		deps, err := c.dependents(ctx, dr, owner)
		if err != nil {
			return err
		}
		for _, d := range deps {
			if err := c.removeRefs(ctx, dr, d, drop); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("orphan dependents: %w", err)
	}
	return c.removeFinalizer(ctx, r, owner, metav1.FinalizerOrphanDependents)
}

// hasDependentsNow reports whether some object has a reference to owner,
// once every cache holds what the log holds now: a dependent created just
// before its owner's owner was deleted in the foreground must be seen, or
// its subtree would go in the background.
func (c *Controller) hasDependentsNow(ctx context.Context, owner metav1.Object) (bool, error) {
	if err := c.catchUp(ctx); err != nil {
		return false, err
	}
	for _, r := range c.all() {
		deps, err := c.dependents(ctx, r, owner)
		if err != nil {
			return false, err
		}
		if len(deps) > 0 {
			return true, nil
		}
	}
	return false, nil
}

// catchUp waits until every full cache holds what the log holds now. Each
// follows its own resource and may lag the one whose event started the
// reconcile. Partial caches are not waited for: dependents lists their
// resources through the apiserver.
func (c *Controller) catchUp(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for _, r := range c.all() {
		if r.cache.Partial() {
			continue
		}
		if err := r.cache.WaitForLog(ctx); err != nil {
			return fmt.Errorf("wait for the %s cache: %w", r.gvr.Resource, err)
		}
	}
	return nil
}

// dependents are the objects of resource r with a reference to owner. A
// partial cache (a scaled-out replica's pods: only those of its own
// partitions' controllers) may miss some, so its resource is listed
// through the apiserver instead: in owner's namespace, where namespaced
// dependents of a namespaced owner live, or everywhere.
func (c *Controller) dependents(ctx context.Context, r *resource, owner metav1.Object) ([]consumer.Object, error) {
	uid := string(owner.GetUID())
	if !r.cache.Partial() {
		return r.cache.ByIndex(IndexOwnerUID, uid), nil
	}
	var cl dynamic.ResourceInterface = c.client.Resource(r.gvr)
	if r.namespaced && owner.GetNamespace() != "" {
		cl = c.client.Resource(r.gvr).Namespace(owner.GetNamespace())
	}
	list, err := cl.List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list the dependents of %s: %w", consumer.KeyOf(owner), err)
	}
	var out []consumer.Object
	for i := range list.Items {
		if slices.Contains(ownerUIDs(&list.Items[i]), uid) {
			out = append(out, &list.Items[i])
		}
	}
	return out, nil
}

// deleteObject deletes obj as last read: the UID and resourceVersion
// preconditions make the delete fail (and the key retry) if obj was
// replaced or changed since.
func (c *Controller) deleteObject(ctx context.Context, r *resource, obj metav1.Object, policy metav1.DeletionPropagation) error {
	uid, rv := obj.GetUID(), obj.GetResourceVersion()
	err := c.iface(r, obj).Delete(ctx, obj.GetName(), metav1.DeleteOptions{
		Preconditions:     &metav1.Preconditions{UID: &uid, ResourceVersion: &rv},
		PropagationPolicy: &policy,
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete (%s): %w", policy, err)
	}
	c.log.Info("deleted dependent", "resource", r.gvr.GroupResource().String(), "key", consumer.KeyOf(obj),
		"propagation", string(policy))
	return nil
}

// removeRefs drops the references to drop from obj: a fresh read, then an
// update with its resourceVersion, retried on conflict.
func (c *Controller) removeRefs(ctx context.Context, r *resource, obj metav1.Object, drop map[types.UID]bool) error {
	return c.mutate(ctx, r, obj, func(u *unstructured.Unstructured) bool {
		refs := u.GetOwnerReferences()
		kept := slices.DeleteFunc(slices.Clone(refs), func(ref metav1.OwnerReference) bool { return drop[ref.UID] })
		if len(kept) == len(refs) {
			return false
		}
		u.SetOwnerReferences(kept)
		return true
	})
}

// removeFinalizer removes finalizer f from obj; the apiserver deletes obj
// if it was the last one.
func (c *Controller) removeFinalizer(ctx context.Context, r *resource, obj metav1.Object, f string) error {
	return c.mutate(ctx, r, obj, func(u *unstructured.Unstructured) bool {
		fs := u.GetFinalizers()
		if !slices.Contains(fs, f) {
			return false
		}
		u.SetFinalizers(slices.DeleteFunc(slices.Clone(fs), func(s string) bool { return s == f }))
		return true
	})
}

// mutate reads obj from the apiserver, applies change and updates it, until
// there is no conflict. Nothing is written if obj is gone, was replaced
// (another UID) or change reports no change.
func (c *Controller) mutate(ctx context.Context, r *resource, obj metav1.Object, change func(*unstructured.Unstructured) bool) error {
	cl := c.iface(r, obj)
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		live, err := cl.Get(ctx, obj.GetName(), metav1.GetOptions{})
		if err != nil {
			return err
		}
		if live.GetUID() != obj.GetUID() || !change(live) {
			return nil
		}
		_, err = cl.Update(ctx, live, metav1.UpdateOptions{})
		return err
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("update %s: %w", consumer.KeyOf(obj), err)
	}
	return nil
}

func (c *Controller) iface(r *resource, obj metav1.Object) dynamic.ResourceInterface {
	if r.namespaced {
		return c.client.Resource(r.gvr).Namespace(obj.GetNamespace())
	}
	return c.client.Resource(r.gvr)
}
