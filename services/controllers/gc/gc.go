package gc

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/events/consumer"
)

// IndexOwnerUID indexes objects by the UID of every one of their
// ownerReferences (consumer.IndexOwner has only the controller's).
const IndexOwnerUID = "ownerUID"

// Options configure the garbage collector.
type Options struct {
	// Workers is the number of concurrent reconciles per resource; 0 means 2.
	Workers int
	// Owns, if set, decides which keys this collector handles instead of
	// the manager's shard (tests that split keys without one).
	Owns func(key string) bool
}

// Controller is the garbage collector. Build it with New; its Manager runs
// it.
type Controller struct {
	m      *consumer.Manager
	opts   Options
	log    *slog.Logger
	client dynamic.Interface
	disco  discovery.DiscoveryInterface

	// Set by run before any reconcile, replaced (under mu) as custom
	// resources come and go; read through all and kind.
	mu        sync.RWMutex
	resources []*resource
	byKind    map[schema.GroupKind]*resource
	// wg holds the caches and controllers of resources found after start.
	wg sync.WaitGroup

	absent absentOwners
	// started is set once resources, caches and controllers are built.
	started atomic.Bool
	// starting keeps the manager not ready until then.
	starting func()
}

// resource is one served resource with its cache and controller.
type resource struct {
	gvr        schema.GroupVersionResource
	kind       string
	namespaced bool
	cache      consumer.MetaCache
	ctrl       *consumer.Controller
	// stop ends the cache and controller of a resource found after
	// start; nil for those the manager runs.
	stop func()
}

// New builds a garbage collector on m. It does no I/O: when m runs it,
// it discovers the resources and asks m for a cache of each (MetaFor: the
// typed caches other controllers asked for first are shared) and a
// controller.
func New(m *consumer.Manager, opts Options) (*Controller, error) {
	if opts.Workers <= 0 {
		opts.Workers = 2
	}
	c := &Controller{m: m, opts: opts, log: m.Log().With("controller", "gc"), client: m.Dynamic(), disco: m.Discovery(),
		absent: absentOwners{m: map[types.UID]struct{}{}}}
	c.starting = m.Starting("garbagecollector")
	m.Add("garbagecollector", consumer.RunnerFunc(c.run))
	return c, nil
}

// run discovers the served resources, registers a cache and a controller
// for each with the manager, and returns when ctx ends.
func (c *Controller) run(ctx context.Context) error {
	if err := c.discover(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	waitFor := make([]consumer.Syncer, 0, len(c.resources))
	for _, r := range c.resources {
		waitFor = append(waitFor, r.cache)
	}
	var ctrls []*consumer.Controller
	for _, r := range c.resources {
		owns, guard := c.ownership(r)
		ctrl, err := consumer.NewController(consumer.ControllerConfig{
			Name: "gc-" + r.gvr.GroupResource().String(), Reconciler: reconciler{c, r},
			Workers: c.opts.Workers, Owns: owns, Guard: guard, WaitFor: waitFor, Log: c.log,
		})
		if err != nil {
			return fmt.Errorf("gc: run: %w", err)
		}
		r.ctrl = ctrl
		ctrls = append(ctrls, ctrl)
	}
	for _, r := range c.resources {
		r.cache.AddHandler(c.handler(r))
		r.ctrl.OnResync(func(cause *events.Event) {
			for _, o := range r.cache.List(nil) {
				r.ctrl.Enqueue(consumer.KeyOf(o), cause)
			}
		})
	}
	c.started.Store(true)
	c.log.Info("garbage collector starting", "resources", len(c.resources))
	for _, ctrl := range ctrls {
		c.m.AddController(ctrl)
	}
	c.starting()
	err := c.follow(ctx)
	c.wg.Wait()
	return err
}

// ownership is the Owns and Guard for the objects of r. A
// partial cache (a scaled-out manager's pods, see
// consumer.Cache.SetPartitions) holds the objects whose controller's
// partition this replica follows, so its objects go to the replica that
// owns their controller's key; an object without a controller, or not
// in the cache, goes by its own key, as the objects of complete caches do.
func (c *Controller) ownership(r *resource) (owns func(string) bool, guard func(string) (func(), bool)) {
	shardKey := func(key string) string {
		if !r.cache.Partial() {
			return key
		}
		obj, ok := r.cache.Get(consumer.SplitKey(key))
		if !ok {
			return key
		}
		if ref := metav1.GetControllerOfNoCopy(obj); ref != nil {
			return consumer.Key(obj.GetNamespace(), ref.Name)
		}
		return key
	}
	o, g := c.m.Owns(), c.m.Guard()
	if c.opts.Owns != nil {
		o, g = c.opts.Owns, nil
	}
	if o != nil {
		owns = func(key string) bool { return o(shardKey(key)) }
	}
	if g != nil {
		guard = func(key string) (func(), bool) { return g(shardKey(key)) }
	}
	return owns, guard
}

// discover lists the resources to collect, retrying until the apiserver
// answers or ctx ends, and asks the manager for a cache of each.
func (c *Controller) discover(ctx context.Context) error {
	var found []*resource
	err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		var err error
		found, err = c.served()
		if len(found) == 0 {
			c.log.Warn("discovery failed", "err", err)
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("gc: discovery: %w", err)
	}
	c.byKind = map[schema.GroupKind]*resource{}
	for _, r := range found {
		if r.cache, err = consumer.MetaFor(c.m, r.gvr, consumer.WithMetaIndex(IndexOwnerUID, ownerUIDs)); err != nil {
			return fmt.Errorf("gc: cache %v: %w", r.gvr, err)
		}
		c.resources = append(c.resources, r)
		c.byKind[schema.GroupKind{Group: r.gvr.Group, Kind: r.kind}] = r
	}
	return nil
}

// served is the resources discovery lists that the collector can handle
// (list, watch, get, delete, update), without caches; with an error,
// those of the groups that answered.
func (c *Controller) served() ([]*resource, error) {
	lists, derr := c.disco.ServerPreferredResources()
	if derr != nil && len(lists) == 0 {
		return nil, derr
	}
	var out []*resource
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		for _, ar := range l.APIResources {
			if strings.Contains(ar.Name, "/") || !hasVerbs(ar.Verbs, "list", "watch", "get", "delete", "update") {
				continue
			}
			out = append(out, &resource{gvr: gv.WithResource(ar.Name), kind: ar.Kind, namespaced: ar.Namespaced})
		}
	}
	return out, derr
}

func hasVerbs(have metav1.Verbs, want ...string) bool {
	for _, v := range want {
		if !slices.Contains(have, v) {
			return false
		}
	}
	return true
}

// ownerUIDs is the IndexOwnerUID index function.
func ownerUIDs(obj metav1.Object) []string {
	refs := obj.GetOwnerReferences()
	out := make([]string, 0, len(refs))
	for _, r := range refs {
		out = append(out, string(r.UID))
	}
	return out
}

// handler queues the work a change implies. It only queues: the reconcile
// decides from the current state.
func (c *Controller) handler(r *resource) consumer.Handler[consumer.Object] {
	return consumer.Handler[consumer.Object]{
		OnAdd: func(obj consumer.Object, ev *events.Event) {
			if interesting(obj) {
				r.ctrl.Enqueue(consumer.KeyOf(obj), ev)
			}
		},
		OnUpdate: func(old, obj consumer.Object, ev *events.Event) {
			if interesting(obj) {
				r.ctrl.Enqueue(consumer.KeyOf(obj), ev)
			}
			if deletingDependents(obj) && !deletingDependents(old) {
				// Foreground deletion starts: every dependent decides
				// whether it goes too.
				c.enqueueDependents(obj.GetUID(), ev)
			}
			if obj.GetDeletionTimestamp() != nil && old.GetDeletionTimestamp() == nil {
				// A dependent that goes away may let a waiting owner
				// go; so may one whose reference is removed (below).
				c.enqueueOwners(old, old.GetOwnerReferences(), ev)
			}
			if removed := removedRefs(old, obj); len(removed) > 0 {
				c.enqueueOwners(old, removed, ev)
			}
		},
		OnDelete: func(obj consumer.Object, ev *events.Event) {
			c.enqueueDependents(obj.GetUID(), ev)
			c.enqueueOwners(obj, obj.GetOwnerReferences(), ev)
		},
	}
}

// interesting: objects the collector may have to act on.
func interesting(obj metav1.Object) bool {
	if len(obj.GetOwnerReferences()) > 0 {
		return true
	}
	return obj.GetDeletionTimestamp() != nil && (hasFinalizer(obj, metav1.FinalizerOrphanDependents) ||
		hasFinalizer(obj, metav1.FinalizerDeleteDependents))
}

// enqueueDependents queues every object that has an ownerReference to uid.
func (c *Controller) enqueueDependents(uid types.UID, ev *events.Event) {
	for _, r := range c.all() {
		for _, d := range r.cache.ByIndex(IndexOwnerUID, string(uid)) {
			r.ctrl.Enqueue(consumer.KeyOf(d), ev)
		}
	}
}

// enqueueOwners queues the owners refs name (those of a known kind).
func (c *Controller) enqueueOwners(dep metav1.Object, refs []metav1.OwnerReference, ev *events.Event) {
	for _, ref := range refs {
		r, ns, ok := c.ownerResource(dep, ref)
		if ok {
			r.ctrl.Enqueue(consumer.Key(ns, ref.Name), ev)
		}
	}
}

// ownerResource is the resource and namespace of the owner ref names.
// ok is false for an unknown kind or a namespaced owner of a
// cluster-scoped dependent (which cannot exist).
func (c *Controller) ownerResource(dep metav1.Object, ref metav1.OwnerReference) (*resource, string, bool) {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return nil, "", false
	}
	r, ok := c.kind(schema.GroupKind{Group: gv.Group, Kind: ref.Kind})
	if !ok {
		return nil, "", false
	}
	if !r.namespaced {
		return r, "", true
	}
	if dep.GetNamespace() == "" {
		return r, "", false
	}
	return r, dep.GetNamespace(), true
}

// removedRefs are the references old has and obj no longer has.
func removedRefs(old, obj metav1.Object) []metav1.OwnerReference {
	var out []metav1.OwnerReference
	now := obj.GetOwnerReferences()
	for _, ref := range old.GetOwnerReferences() {
		if !slices.ContainsFunc(now, func(r metav1.OwnerReference) bool { return r.UID == ref.UID }) {
			out = append(out, ref)
		}
	}
	return out
}

func hasFinalizer(obj metav1.Object, f string) bool {
	return slices.Contains(obj.GetFinalizers(), f)
}

// deletingDependents: obj is being deleted in the foreground.
func deletingDependents(obj metav1.Object) bool {
	return obj.GetDeletionTimestamp() != nil && hasFinalizer(obj, metav1.FinalizerDeleteDependents)
}

// absentOwners remembers owner UIDs the apiserver confirmed absent, so a
// thousand dependents of one deleted owner cost one GET. UIDs are never
// reused, so an entry never turns wrong; the set is simply bounded.
type absentOwners struct {
	mu sync.Mutex
	m  map[types.UID]struct{}
}

const maxAbsent = 1000

func (a *absentOwners) has(uid types.UID) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	_, ok := a.m[uid]
	return ok
}

func (a *absentOwners) add(uid types.UID) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.m) >= maxAbsent {
		clear(a.m)
	}
	a.m[uid] = struct{}{}
}
