package consumer

import (
	"context"
	"fmt"
	"reflect"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// CacheOption narrows or extends a cache asked of a Manager (CacheFor,
// MetaFor).
type CacheOption func(*cacheSpec)

type cacheSpec struct {
	namespace, node, name string
	// indexers are IndexFunc[T] or MetaIndexFunc values, by name.
	indexers    map[string]any
	partitioned bool
}

// MetaIndexFunc is an index function over any object's metadata; it
// indexes a cache of any type (WithMetaIndex).
type MetaIndexFunc func(obj metav1.Object) []string

// InNamespace restricts the cache to one namespace.
func InNamespace(ns string) CacheOption { return func(s *cacheSpec) { s.namespace = ns } }

// OnNode restricts a pod cache to the pods bound to one node (a kubelet).
func OnNode(node string) CacheOption { return func(s *cacheSpec) { s.node = node } }

// Named restricts the cache to the one object of that name.
func Named(name string) CacheOption { return func(s *cacheSpec) { s.name = name } }

// WithIndexers adds indexes to the cache. An index name means one index
// per cache: when two consumers ask for the same name, the first one's
// function is kept.
func WithIndexers[T Object](ix map[string]IndexFunc[T]) CacheOption {
	return func(s *cacheSpec) {
		for k, v := range ix {
			s.indexers[k] = v
		}
	}
}

// WithMetaIndex adds an index computed from the objects' metadata, for a
// cache of any type.
func WithMetaIndex(name string, fn MetaIndexFunc) CacheOption {
	return func(s *cacheSpec) { s.indexers[name] = fn }
}

// Partitioned says the consumer can work with a cache that follows only
// the subject partitions of the keys this replica's shard leases (see
// Cache.SetPartitions): with a sharded Manager, a cache every typed
// consumer asked Partitioned of follows only those, and the Manager moves
// it along as partitions come and go. One consumer that did not ask makes
// the cache follow everything. Without a shard, it changes nothing.
func Partitioned() CacheOption { return func(s *cacheSpec) { s.partitioned = true } }

// cacheKey identifies a cache of a Manager: one per resource, scope and
// type.
type cacheKey struct {
	gvr                   schema.GroupVersionResource
	namespace, node, name string
	typ                   reflect.Type
}

// managedCache is one cache of a Manager.
type managedCache struct {
	key cacheKey
	c   anyCache
	// partitioned: every typed consumer accepts partitions (Partitioned)
	// and the manager is sharded.
	partitioned bool
	meta        bool // a metadata-only cache (MetaFor built it)
}

// anyCache is what the Manager needs of a *Cache[T], whatever T.
type anyCache interface {
	Runner
	Resource() schema.GroupVersionResource
	HasSynced() bool
	WaitForLog(ctx context.Context) error
	SetPartitions(parts []int)
	metaCache() MetaCache
	addIndexers(ix map[string]any) error
}

var _ anyCache = (*Cache[*metav1.PartialObjectMetadata])(nil)

func (c *Cache[T]) metaCache() MetaCache { return Meta(c) }

// indexFuncs converts index functions given as IndexFunc[T] or
// MetaIndexFunc.
func indexFuncs[T Object](ix map[string]any) (map[string]IndexFunc[T], error) {
	out := make(map[string]IndexFunc[T], len(ix))
	for name, v := range ix {
		switch fn := v.(type) {
		case IndexFunc[T]:
			out[name] = fn
		case MetaIndexFunc:
			out[name] = func(obj T) []string { return fn(obj) }
		default:
			return nil, fmt.Errorf("consumer: index %q is a %T, not an IndexFunc[%v]: %w", name, v, reflect.TypeFor[T](), ErrConfig)
		}
	}
	return out, nil
}

// addIndexers adds the indexes the cache does not have yet and indexes
// what it holds under them.
func (c *Cache[T]) addIndexers(ix map[string]any) error {
	fns, err := indexFuncs[T](ix)
	if err != nil {
		return err
	}
	c.dispatchMu.Lock()
	defer c.dispatchMu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, fn := range fns {
		if _, ok := c.st.indexers[name]; ok {
			continue
		}
		c.st.addIndex(name, fn)
	}
	return nil
}

// CacheFor is the manager's cache of gvr decoded as T: the first call
// builds it (the manager runs it), later calls with the same resource,
// scope (InNamespace, OnNode) and type return the same cache, with the
// indexes they ask for added. So every event is delivered and decoded
// once per process, however many consumers need the resource.
func CacheFor[T Object](m *Manager, gvr schema.GroupVersionResource, opts ...CacheOption) (*Cache[T], error) {
	spec := cacheSpec{indexers: map[string]any{}}
	for _, o := range opts {
		o(&spec)
	}
	key := cacheKey{gvr: gvr, namespace: spec.namespace, node: spec.node, name: spec.name, typ: reflect.TypeFor[T]()}
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, ok := m.caches[key]; ok {
		c := e.c.(*Cache[T])
		if err := c.addIndexers(spec.indexers); err != nil {
			return nil, err
		}
		if e.partitioned && !spec.partitioned {
			e.partitioned = false
			c.SetPartitions(nil)
		}
		return c, nil
	}
	ix, err := indexFuncs[T](spec.indexers)
	if err != nil {
		return nil, err
	}
	c, err := NewCache(CacheConfig[T]{Resource: gvr, Namespace: spec.namespace, Node: spec.node, Name: spec.name,
		Config: m.rc, JS: m.opts.JS, Indexers: ix, Log: m.log})
	if err != nil {
		return nil, err
	}
	e := &managedCache{key: key, c: c, partitioned: spec.partitioned && m.sharder != nil}
	if e.partitioned {
		// Until it holds partitions, a replica follows only the objects
		// without a controller.
		c.SetPartitions(m.subjectPartitionsLocked())
	}
	m.addCacheLocked(e)
	return c, nil
}

// MetaFor is a metadata view of the manager's cache of gvr, for a
// consumer that works on any kind (the garbage collector): a typed cache
// of the resource if one was asked for already (ask for typed caches
// first, in New), else a cache of *metav1.PartialObjectMetadata. Index
// options must be WithMetaIndex. A view does not change whether the cache
// follows partitions: check MetaCache.Partial.
func MetaFor(m *Manager, gvr schema.GroupVersionResource, opts ...CacheOption) (MetaCache, error) {
	spec := cacheSpec{indexers: map[string]any{}}
	for _, o := range opts {
		o(&spec)
	}
	m.mu.Lock()
	var found *managedCache
	for _, e := range m.order {
		if e.key.gvr == gvr && e.key.namespace == spec.namespace && e.key.node == spec.node && e.key.name == spec.name && (found == nil || found.meta) {
			found = e
		}
	}
	m.mu.Unlock()
	if found == nil {
		c, err := CacheFor[*metav1.PartialObjectMetadata](m, gvr, opts...)
		if err != nil {
			return nil, err
		}
		m.mu.Lock()
		m.caches[cacheKey{gvr: gvr, namespace: spec.namespace, node: spec.node, name: spec.name, typ: reflect.TypeFor[*metav1.PartialObjectMetadata]()}].meta = true
		m.mu.Unlock()
		return Meta(c), nil
	}
	if err := found.c.addIndexers(spec.indexers); err != nil {
		return nil, err
	}
	return found.c.metaCache(), nil
}

// addCacheLocked registers e, starting it if the manager runs.
func (m *Manager) addCacheLocked(e *managedCache) {
	m.caches[e.key] = e
	m.order = append(m.order, e)
	if m.group != nil {
		m.group.Go("cache "+e.key.gvr.String(), e.c)
	}
}
