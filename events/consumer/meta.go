package consumer

import (
	"context"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cairn-dev/cairn/events"
)

// MetaCache is a Cache seen through its objects' metadata, whatever their
// type. A consumer that reads only metadata (the garbage collector) takes
// one so that it can share a typed cache another consumer of the same
// process already runs, instead of following the same subjects of the log
// a second time: every event is then delivered and decoded once.
//
// Objects are shared with the cache: never modify them. The methods are
// those of Cache, with the same contracts.
type MetaCache interface {
	Resource() schema.GroupVersionResource
	Get(namespace, name string) (Object, bool)
	List(sel labels.Selector) []Object
	ByIndex(index, value string) []Object
	HasIndex(name string) bool
	AddHandler(h Handler[Object])
	WaitForSync(ctx context.Context) error
	WaitForLog(ctx context.Context) error
	// Partial: the cache follows only some partitions (Cache.Partial).
	Partial() bool
}

// Meta is c's MetaCache. It does not run c: whoever built c does.
func Meta[T Object](c *Cache[T]) MetaCache { return metaCache[T]{c} }

var _ MetaCache = metaCache[Object]{}

type metaCache[T Object] struct{ c *Cache[T] }

func (m metaCache[T]) Resource() schema.GroupVersionResource { return m.c.Resource() }

func (m metaCache[T]) Get(namespace, name string) (Object, bool) {
	obj, ok := m.c.Get(namespace, name)
	if !ok {
		// A nil T in an interface would not be a nil Object.
		return nil, false
	}
	return obj, true
}

func (m metaCache[T]) List(sel labels.Selector) []Object { return objects(m.c.List(sel)) }

func (m metaCache[T]) ByIndex(index, value string) []Object {
	return objects(m.c.ByIndex(index, value))
}

func (m metaCache[T]) HasIndex(name string) bool { return m.c.HasIndex(name) }

func (m metaCache[T]) Partial() bool { return m.c.Partial() }

func (m metaCache[T]) AddHandler(h Handler[Object]) {
	var th Handler[T]
	if h.OnAdd != nil {
		th.OnAdd = func(obj T, ev *events.Event) { h.OnAdd(obj, ev) }
	}
	if h.OnUpdate != nil {
		th.OnUpdate = func(old, obj T, ev *events.Event) { h.OnUpdate(old, obj, ev) }
	}
	if h.OnDelete != nil {
		th.OnDelete = func(obj T, ev *events.Event) { h.OnDelete(obj, ev) }
	}
	m.c.AddHandler(th)
}

func (m metaCache[T]) WaitForSync(ctx context.Context) error { return m.c.WaitForSync(ctx) }

func (m metaCache[T]) WaitForLog(ctx context.Context) error { return m.c.WaitForLog(ctx) }

func objects[T Object](in []T) []Object {
	out := make([]Object, len(in))
	for i, o := range in {
		out[i] = o
	}
	return out
}

// HasIndex reports whether the cache maintains the named index (the
// built-in ones or one of CacheConfig.Indexers).
func (c *Cache[T]) HasIndex(name string) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	_, ok := c.st.indexers[name]
	return ok
}
