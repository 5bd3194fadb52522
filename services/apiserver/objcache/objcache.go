package objcache

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/services/apiserver/storage"
	"github.com/cairn-dev/cairn/services/apiserver/watchhub"
)

// Key is an object's namespace and name.
type Key = [2]string

// Config is what a cache is built from. Resource, Decode, Store and Hub
// are required.
type Config[T any] struct {
	// Group is the API group ("" for core/v1) and Resource the plural.
	Group    string
	Resource string
	// Decode turns a stored object into its key and the value kept.
	Decode func(raw []byte) (Key, T, error)
	// FromEvent, if set, takes the value from an event's envelope and the
	// cached value (old, nil if none) when it can (ok), sparing the
	// decode.
	FromEvent func(ev *events.Event, old *T) (v T, ok bool)
	// OnChange, if set, is called for every change, with the cache's
	// lock held (keep it short, do not call back): old is nil for an
	// addition, cur nil for a deletion. A snapshot calls it with both nil
	// first (forget everything), then once per object.
	OnChange func(k Key, old, cur *T)
	Store    *storage.Store
	Hub      *watchhub.Hub
	Log      *slog.Logger
}

// Cache is the cache of one resource. Safe for concurrent use.
type Cache[T any] struct {
	cfg Config[T]

	mu         sync.RWMutex
	m          map[Key]T
	synced     chan struct{}
	syncedOnce sync.Once
}

// New builds a cache; Run fills it.
func New[T any](cfg Config[T]) *Cache[T] {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Cache[T]{cfg: cfg, m: map[Key]T{}, synced: make(chan struct{})}
}

// Run fills and follows until ctx ends.
func (c *Cache[T]) Run(ctx context.Context) error {
	for ctx.Err() == nil {
		rev, err := c.snapshot(ctx)
		if err == nil {
			c.syncedOnce.Do(func() { close(c.synced) })
			err = c.follow(ctx, rev)
		}
		if ctx.Err() != nil {
			break
		}
		c.cfg.Log.Warn("objcache: resnapshot", "resource", c.cfg.Resource, "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
	return nil
}

// Synced is closed once the first snapshot is in.
func (c *Cache[T]) Synced() <-chan struct{} { return c.synced }

func (c *Cache[T]) snapshot(ctx context.Context) (events.Revision, error) {
	fresh := map[Key]T{}
	opts := storage.ListOptions{Limit: 500}
	for {
		page, err := c.cfg.Store.List(ctx, storage.Key(c.cfg.Group, c.cfg.Resource, "", ""), opts)
		if err != nil {
			return 0, fmt.Errorf("objcache: snapshot %s: %w", c.cfg.Resource, err)
		}
		opts.Revision = page.Revision
		for _, kv := range page.Items {
			if k, v, err := c.cfg.Decode(kv.Value); err == nil {
				fresh[k] = v
			}
		}
		if page.NextKey == "" {
			break
		}
		opts.StartKey = page.NextKey
	}
	c.mu.Lock()
	c.m = fresh
	if c.cfg.OnChange != nil {
		c.cfg.OnChange(Key{}, nil, nil)
		for k, v := range fresh {
			c.cfg.OnChange(k, nil, &v)
		}
	}
	c.mu.Unlock()
	return opts.Revision, nil
}

func (c *Cache[T]) follow(ctx context.Context, rev events.Revision) error {
	w, err := c.cfg.Hub.Watch(ctx, watchhub.Request{Group: c.cfg.Group, Resource: c.cfg.Resource, From: rev})
	if err != nil {
		return fmt.Errorf("objcache: watch %s: %w", c.cfg.Resource, err)
	}
	defer w.Stop()
	for ev := range w.Events() {
		k := Key{ev.Namespace, ev.Name}
		if ev.Type == events.Deleted {
			c.put(k, nil)
			continue
		}
		if c.cfg.FromEvent != nil {
			var old *T
			if o, ok := c.Peek(k[0], k[1]); ok {
				old = &o
			}
			if v, ok := c.cfg.FromEvent(ev, old); ok {
				c.put(k, &v)
				continue
			}
		}
		_, v, err := c.cfg.Decode(ev.Object)
		if err != nil {
			c.cfg.Log.Warn("objcache: undecodable event", "resource", c.cfg.Resource, "revision", ev.Revision, "err", err)
			continue
		}
		c.put(k, &v)
	}
	if err := w.Err(); err != nil {
		return fmt.Errorf("objcache: watch %s: %w", c.cfg.Resource, err)
	}
	return errors.New("objcache: watch ended")
}

// put stores v under k, or deletes k when v is nil.
func (c *Cache[T]) put(k Key, v *T) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var old *T
	if o, ok := c.m[k]; ok {
		old = &o
	}
	if v == nil {
		delete(c.m, k)
	} else {
		c.m[k] = *v
	}
	if c.cfg.OnChange != nil && (old != nil || v != nil) {
		c.cfg.OnChange(k, old, v)
	}
}

// Peek returns the cached value, without reading etcd.
func (c *Cache[T]) Peek(namespace, name string) (T, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	v, ok := c.m[Key{namespace, name}]
	return v, ok
}

// Get returns the cached value or, on a miss, reads etcd (the object may
// be newer than the cache, as kube's informer-backed getters fall back to
// a live lookup). A missing object is a NotFound API error.
func (c *Cache[T]) Get(ctx context.Context, namespace, name string) (T, error) {
	if v, ok := c.Peek(namespace, name); ok {
		return v, nil
	}
	var zero T
	kv, err := c.cfg.Store.Get(ctx, storage.Key(c.cfg.Group, c.cfg.Resource, namespace, name))
	if errors.Is(err, storage.ErrNotFound) {
		return zero, apierrors.NewNotFound(schema.GroupResource{Group: c.cfg.Group, Resource: c.cfg.Resource}, name)
	}
	if err != nil {
		return zero, err
	}
	_, v, err := c.cfg.Decode(kv.Value)
	return v, err
}
