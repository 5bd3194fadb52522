package gc

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/events/consumer"
)

// crdResource is where CustomResourceDefinitions live: a change to one
// may add or remove a served resource.
var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// rediscoverEvery is how often the collector looks for resources that
// appeared or went away without a CRD event it saw (kube's GC resyncs
// its monitors from discovery every 30 s).
const rediscoverEvery = 30 * time.Second

// all is the resources handled now.
func (c *Controller) all() []*resource {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.resources
}

// kind is the resource of gk, if handled now.
func (c *Controller) kind(gk schema.GroupKind) (*resource, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	r, ok := c.byKind[gk]
	return r, ok
}

// follow keeps the handled resources equal to the served ones, as kube's
// GarbageCollector.Sync: a CRD established starts a cache and a
// controller of its resource (its objects as owners and as dependents), a
// resource no longer served stops them. It rediscovers on every CRD
// change (a few times: another apiserver may serve the new discovery a
// little later) and every rediscoverEvery.
func (c *Controller) follow(ctx context.Context) error {
	kick := make(chan struct{}, 1)
	crds, err := consumer.MetaFor(c.m, crdResource)
	if err != nil {
		return fmt.Errorf("gc: cache %v: %w", crdResource, err)
	}
	poke := func() {
		select {
		case kick <- struct{}{}:
		default:
		}
	}
	crds.AddHandler(consumer.Handler[consumer.Object]{
		OnAdd:    func(consumer.Object, *events.Event) { poke() },
		OnUpdate: func(_, _ consumer.Object, _ *events.Event) { poke() },
		OnDelete: func(consumer.Object, *events.Event) { poke() },
	})
	tick := time.NewTicker(rediscoverEvery)
	defer tick.Stop()
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	retries := 0
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-kick:
			retries = 3
		case <-retry.C:
		case <-tick.C:
		}
		if err := c.resync(ctx); err != nil {
			c.log.Warn("rediscovery failed", "err", err)
		}
		if retries > 0 {
			retries--
			retry.Reset(time.Duration(4-retries) * time.Second)
		}
	}
}

// resync rediscovers once and starts or stops what changed.
func (c *Controller) resync(ctx context.Context) error {
	found, err := c.served()
	if err != nil {
		// Some groups did not answer: stop nothing on a partial answer.
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	have := map[schema.GroupVersionResource]*resource{}
	for _, r := range c.resources {
		have[r.gvr] = r
	}
	var keep []*resource
	byKind := map[schema.GroupKind]*resource{}
	for _, f := range found {
		r, ok := have[f.gvr]
		if !ok {
			if r, err = c.startResource(ctx, f); err != nil {
				return err
			}
			c.log.Info("garbage collector follows a new resource", "resource", r.gvr.String())
		}
		delete(have, f.gvr)
		keep = append(keep, r)
		byKind[schema.GroupKind{Group: r.gvr.Group, Kind: r.kind}] = r
	}
	for _, r := range have {
		c.log.Info("garbage collector stops following a resource", "resource", r.gvr.String())
		if r.stop != nil {
			r.stop()
		}
	}
	c.resources, c.byKind = keep, byKind
	return nil
}

// startResource builds and runs, until ctx ends or the resource goes
// away, a metadata cache and a controller of f, a resource found after
// start (the manager's caches cannot be stopped, so these are the
// collector's own).
func (c *Controller) startResource(ctx context.Context, f *resource) (*resource, error) {
	cache, err := consumer.NewCache(consumer.CacheConfig[*metav1.PartialObjectMetadata]{
		Resource: f.gvr, Config: c.m.RestConfig(), JS: c.m.JS(), Log: c.log,
		Indexers: map[string]consumer.IndexFunc[*metav1.PartialObjectMetadata]{
			IndexOwnerUID: func(o *metav1.PartialObjectMetadata) []string { return ownerUIDs(o) },
		},
	})
	if err != nil {
		return nil, fmt.Errorf("gc: cache %v: %w", f.gvr, err)
	}
	r := &resource{gvr: f.gvr, kind: f.kind, namespaced: f.namespaced, cache: consumer.Meta(cache)}
	owns, guard := c.ownership(r)
	r.ctrl, err = consumer.NewController(consumer.ControllerConfig{
		Name: "gc-" + r.gvr.GroupResource().String(), Reconciler: reconciler{c, r},
		Workers: c.opts.Workers, Owns: owns, Guard: guard, WaitFor: []consumer.Syncer{r.cache}, Log: c.log,
	})
	if err != nil {
		return nil, fmt.Errorf("gc: %v: %w", f.gvr, err)
	}
	r.cache.AddHandler(c.handler(r))
	rctx, cancel := context.WithCancel(ctx)
	r.stop = cancel
	c.wg.Go(func() { _ = cache.Run(rctx) })
	c.wg.Go(func() { _ = r.ctrl.Run(rctx) })
	return r, nil
}
