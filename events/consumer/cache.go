package consumer

import (
	"context"
	"errors"
	"fmt"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"log/slog"
	"reflect"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/cairn-dev/cairn/events"
)

// Sentinel errors of the consumer runtime.
var (
	// ErrRunning is returned by Run when the Cache or Controller already runs.
	ErrRunning = errors.New("consumer: already running")
	// ErrConfig is returned for an incomplete configuration.
	ErrConfig = errors.New("consumer: bad config")
)

// CacheConfig configures a Cache.
type CacheConfig[T Object] struct {
	// Resource is what the cache holds, e.g. {Version: "v1", Resource:
	// "pods"} or {Group: "apps", Version: "v1", Resource: "replicasets"}.
	Resource schema.GroupVersionResource
	// Namespace restricts the cache to one namespace; empty means all.
	Namespace string
	// Node restricts a pod cache to the pods bound to one node (a kubelet).
	// Only pods have a node; a pod enters the cache when it is bound.
	Node string
	// Name restricts the cache to the object of that name (a node's proxy
	// follows its own Node, as kube-proxy's field selector does).
	Name string

	// Config reaches the apiserver for the snapshot (LIST).
	Config *rest.Config
	// JS reads the log.
	JS jetstream.JetStream

	// New returns an empty object to decode into. Nil allocates a new T
	// (T must then be a pointer to a struct, such as *corev1.Pod).
	New func() T
	// Indexers are added to the built-in IndexNamespace and IndexOwner.
	Indexers map[string]IndexFunc[T]
	// PageSize is the LIST page size; 0 means 500.
	PageSize int64
	// TombstoneTTL is how long a delete is remembered to reject older
	// events for the same key; 0 means 10 minutes.
	TombstoneTTL time.Duration
	Log          *slog.Logger
}

// Handler receives the changes of a Cache. Every callback is optional. They
// are called from one goroutine, in log order, after the change is visible
// through Get and List; a slow callback delays the whole cache, so handlers
// should only enqueue work. Objects are shared with the cache: never
// modify them (DeepCopy first).
//
// ev is the event that caused the change, or nil when the change comes from
// a snapshot (the initial LIST, a relist, or the replay AddHandler does).
// A relist (after the first snapshot: partitions gained, or a position the
// log lost) gives the changes it finds in objects the cache already
// followed their event when the log still has it (see gapSet): those are
// changes the tail would have delivered, and work they cause keeps its
// cause.
// For OnDelete, obj is the object's last state (from the event, or the
// cached copy when ev is nil).
type Handler[T Object] struct {
	OnAdd    func(obj T, ev *events.Event)
	OnUpdate func(old, obj T, ev *events.Event)
	OnDelete func(obj T, ev *events.Event)
}

// CacheStats counts what a Cache did since it was created.
type CacheStats struct {
	// Lists is the number of snapshots taken (1 + relists).
	Lists int64
	// Delivered is the number of events the log delivered.
	Delivered int64
	// Applied is the number of events that changed the cache.
	Applied int64
	// Skipped is the number of events ignored as not newer than what the
	// cache holds (duplicates, redeliveries, events already in a snapshot).
	Skipped int64
}

// Cache is a local projection of one resource: a snapshot from the
// apiserver at revision R, kept current by the log from R+1. See the
// package documentation. All methods are safe for concurrent use.
type Cache[T Object] struct {
	cfg    CacheConfig[T]
	newObj func() T
	// unstructured objects need their own decoder (see decodeInto).
	unstructured bool
	log          *slog.Logger
	stream       string
	filter       string

	mu  sync.RWMutex
	st  *store[T]
	rev atomic.Int64  // log position applied
	seq atomic.Uint64 // stream sequence of the last event applied
	// listRev is the revision of the last snapshot: events up to it are in
	// the snapshot already. Guarded by mu.
	listRev   events.Revision
	lastPrune time.Time

	// dispatchMu orders changes and handler calls: applying an event,
	// applying a snapshot and adding a handler exclude each other.
	dispatchMu sync.Mutex
	handlers   []Handler[T]

	// pmu guards want and pgen: the partitions SetPartitions asked for
	// and how often it was called. kick tells Run to restart the tail.
	pmu  sync.Mutex
	want *partitionSet
	pgen uint64
	kick chan struct{}
	// following is what the cache follows now, and followingGen its
	// generation; only Run touches them.
	following    *partitionSet
	followingGen uint64
	// followed is the generation and the filters of following, for
	// WaitForLog.
	followed atomic.Pointer[followState]

	synced     chan struct{}
	syncedOnce sync.Once
	running    atomic.Bool
	// resume is the revision the next tail starts at (0: take a snapshot
	// first). Only Run touches it.
	resume events.Revision

	lists, delivered, applied, skipped atomic.Int64
}

// NewCache builds a Cache; Run fills it.
func NewCache[T Object](cfg CacheConfig[T]) (*Cache[T], error) {
	if cfg.Resource.Resource == "" || cfg.Resource.Version == "" || cfg.Config == nil || cfg.JS == nil {
		return nil, fmt.Errorf("consumer: new cache: resource, version, Config and JS are required: %w", ErrConfig)
	}
	if cfg.Node != "" && (cfg.Resource.Group != "" || cfg.Resource.Resource != "pods") {
		return nil, fmt.Errorf("consumer: new cache: Node applies to pods only: %w", ErrConfig)
	}
	if cfg.PageSize <= 0 {
		cfg.PageSize = 500
	}
	if cfg.TombstoneTTL <= 0 {
		cfg.TombstoneTTL = 10 * time.Minute
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	newObj := cfg.New
	if newObj == nil {
		t := reflect.TypeFor[T]()
		if t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
			return nil, fmt.Errorf("consumer: new cache: %v is not a pointer to a struct, set New: %w", t, ErrConfig)
		}
		newObj = func() T { return reflect.New(t.Elem()).Interface().(T) }
	}
	indexers := map[string]IndexFunc[T]{IndexNamespace: indexNamespace[T], IndexOwner: indexOwner[T]}
	for k, v := range cfg.Indexers {
		indexers[k] = v
	}
	stream := events.Stream
	if events.IsLease(cfg.Resource.Group, cfg.Resource.Resource) {
		stream = events.LeaseStream
	}
	_, isUnstructured := any(newObj()).(*unstructured.Unstructured)
	c := &Cache[T]{
		cfg:          cfg,
		unstructured: isUnstructured,
		newObj:       newObj,
		log:          cfg.Log.With("resource", cfg.Resource.String()),
		stream:       stream,
		filter:       events.Filter(cfg.Resource.Group, cfg.Resource.Resource, cfg.Node, cfg.Namespace, cfg.Name),
		st:           newStore(indexers),
		synced:       make(chan struct{}),
		kick:         make(chan struct{}, 1),
	}
	return c, nil
}

// Resource is the resource the cache holds.
func (c *Cache[T]) Resource() schema.GroupVersionResource { return c.cfg.Resource }

// Get returns the object with that namespace (empty when cluster-scoped)
// and name. The object is shared: do not modify it.
func (c *Cache[T]) Get(namespace, name string) (T, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	e, ok := c.st.items[Key(namespace, name)]
	return e.obj, ok
}

// List returns the objects whose labels match sel (nil matches all), sorted
// by key. The objects are shared: do not modify them.
func (c *Cache[T]) List(sel labels.Selector) []T {
	c.mu.RLock()
	defer c.mu.RUnlock()
	keys := make([]string, 0, len(c.st.items))
	for k, e := range c.st.items {
		if sel == nil || sel.Matches(labels.Set(e.obj.GetLabels())) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	out := make([]T, len(keys))
	for i, k := range keys {
		out[i] = c.st.items[k].obj
	}
	return out
}

// ByIndex returns the objects indexed under value in the named index,
// sorted by key: ByIndex(IndexOwner, string(rs.UID)) are the objects
// controlled by rs.
func (c *Cache[T]) ByIndex(index, value string) []T {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.st.byIndex(index, value)
}

// Len is the number of objects in the cache.
func (c *Cache[T]) Len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.st.items)
}

// Revision is the log position the cache reflects: every change up to it
// that the cache selects has been applied (the snapshot's revision, then
// the revision of each event read).
func (c *Cache[T]) Revision() events.Revision { return events.Revision(c.rev.Load()) }

// HasSynced reports whether the first snapshot has been applied.
func (c *Cache[T]) HasSynced() bool {
	select {
	case <-c.synced:
		return true
	default:
		return false
	}
}

// WaitForSync blocks until the first snapshot has been applied (and its
// OnAdd calls made) or ctx ends.
func (c *Cache[T]) WaitForSync(ctx context.Context) error {
	select {
	case <-c.synced:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("consumer: wait for %s cache: %w", c.cfg.Resource.Resource, ctx.Err())
	}
}

// Stats returns the cache's counters.
func (c *Cache[T]) Stats() CacheStats {
	return CacheStats{Lists: c.lists.Load(), Delivered: c.delivered.Load(), Applied: c.applied.Load(), Skipped: c.skipped.Load()}
}

// AddHandler registers h. If the cache has synced, h first gets OnAdd(obj,
// nil) for every object it holds, so a handler added late sees the same
// state as one added before Run; then every later change.
func (c *Cache[T]) AddHandler(h Handler[T]) {
	c.dispatchMu.Lock()
	defer c.dispatchMu.Unlock()
	c.handlers = append(c.handlers, h)
	if !c.HasSynced() || h.OnAdd == nil {
		return
	}
	for _, obj := range c.List(nil) {
		h.OnAdd(obj, nil)
	}
}

// apply applies one event from the log. An event is applied only if its
// revision is newer than both the snapshot and what the cache holds (or
// last deleted) for that key; anything else is a duplicate, a redelivery or
// already part of the snapshot, and is skipped.
//
// obj, if not nil, is ev's object already decoded (the tail decodes the
// envelope and the object in one pass); otherwise apply decodes it.
func (c *Cache[T]) apply(ev *events.Event, obj T, decoded bool) {
	c.delivered.Add(1)
	c.dispatchMu.Lock()
	defer c.dispatchMu.Unlock()
	defer c.advance(ev.Revision)
	key := Key(ev.Namespace, ev.Name)

	c.mu.Lock()
	skip := ev.Revision <= c.listRev || ev.Revision <= c.st.revision(key)
	c.mu.Unlock()
	if skip {
		c.skipped.Add(1)
		return
	}
	// Decoding happens outside mu, so readers are not held up; only this
	// goroutine (holding dispatchMu) changes the store meanwhile.
	if !decoded {
		obj = c.newObj()
		if err := decodeInto(ev.Object, obj); err != nil {
			// A malformed object breaks the log contract; a relist would
			// not repair it. Skip it loudly.
			c.log.Error("undecodable object in event", "key", key, "revision", int64(ev.Revision), "event", ev.ID, "err", err)
			c.skipped.Add(1)
			return
		}
	}
	c.mu.Lock()
	now := time.Now()
	if now.Sub(c.lastPrune) > c.cfg.TombstoneTTL/2 {
		c.st.prune(now.Add(-c.cfg.TombstoneTTL))
		c.lastPrune = now
	}
	var old T
	var existed bool
	if ev.Type == events.Deleted {
		old, existed = c.st.remove(key, ev.Revision, now)
	} else {
		old, existed = c.st.put(key, obj, ev.Revision)
	}
	c.mu.Unlock()
	c.applied.Add(1)

	for _, h := range c.handlers {
		switch {
		case ev.Type == events.Deleted:
			if existed && h.OnDelete != nil {
				h.OnDelete(obj, ev)
			}
		case existed:
			if h.OnUpdate != nil {
				h.OnUpdate(old, obj, ev)
			}
		default:
			if h.OnAdd != nil {
				h.OnAdd(obj, ev)
			}
		}
	}
	if ev.Type != events.Deleted && !c.following.keeps(obj) {
		// It moved to a partition the cache does not follow.
		c.mu.Lock()
		c.st.remove(key, ev.Revision, now)
		c.mu.Unlock()
	}
}

// replace installs a snapshot taken at rev: objects not in it are deleted,
// new ones added, changed ones updated; objects whose revision did not
// change are left alone. Objects the cache no longer follows (see
// SetPartitions) go without a handler call. Handlers get a nil event,
// except for the changes gap finds on the log.
func (c *Cache[T]) replace(ctx context.Context, objs []T, rev events.Revision, gap gapSet) {
	c.dispatchMu.Lock()
	defer c.dispatchMu.Unlock()
	type change struct {
		old, obj T
		kind     events.Type
	}
	var changes []change
	c.mu.Lock()
	seen := make(map[string]bool, len(objs))
	for _, obj := range objs {
		key := KeyOf(obj)
		seen[key] = true
		orev, _ := events.ParseRevision(obj.GetResourceVersion())
		prev, existed := c.st.items[key]
		if existed && prev.rev == orev {
			continue
		}
		c.st.put(key, obj, orev)
		if existed {
			changes = append(changes, change{old: prev.obj, obj: obj, kind: events.Modified})
		} else {
			changes = append(changes, change{obj: obj, kind: events.Added})
		}
	}
	var gone []string
	for key := range c.st.items {
		if !seen[key] {
			gone = append(gone, key)
		}
	}
	sort.Strings(gone)
	now := time.Now()
	for _, key := range gone {
		old, _ := c.st.remove(key, rev, now)
		if c.following.keeps(old) {
			changes = append(changes, change{obj: old, kind: events.Deleted})
		}
	}
	// Tombstones older than the snapshot are now meaningless: every event
	// up to rev is skipped anyway.
	c.st.tombstones = map[string]tombstone{}
	c.listRev = rev
	c.mu.Unlock()
	evs := make([]*events.Event, len(changes))
	if gap.on {
		var n int
		for i, ch := range changes {
			if gap.followed.keeps(ch.obj) && n < maxGapLookups {
				if n == 0 {
					c.waitGapPublished(ctx, rev)
				}
				n++
				evs[i] = c.gapEvent(ctx, ch.obj, ch.kind, rev)
			}
		}
	}
	for i, ch := range changes {
		for _, h := range c.handlers {
			switch {
			case ch.kind == events.Added && h.OnAdd != nil:
				h.OnAdd(ch.obj, evs[i])
			case ch.kind == events.Modified && h.OnUpdate != nil:
				h.OnUpdate(ch.old, ch.obj, evs[i])
			case ch.kind == events.Deleted && h.OnDelete != nil:
				h.OnDelete(ch.obj, evs[i])
			}
		}
	}
	c.advance(rev)
	c.syncedOnce.Do(func() { close(c.synced) })
}

// advance moves the log position forward to rev. Only the goroutine holding
// dispatchMu calls it.
func (c *Cache[T]) advance(rev events.Revision) {
	if int64(rev) > c.rev.Load() {
		c.rev.Store(int64(rev))
	}
}
