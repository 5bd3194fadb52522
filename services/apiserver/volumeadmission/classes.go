package volumeadmission

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	storagev1 "k8s.io/api/storage/v1"

	"github.com/cairn-dev/cairn/schemas"
	"github.com/cairn-dev/cairn/schemas/codec"
	"github.com/cairn-dev/cairn/services/apiserver/objcache"
	"github.com/cairn-dev/cairn/services/apiserver/storage"
	"github.com/cairn-dev/cairn/services/apiserver/watchhub"
)

// Class is what the plugins need of a StorageClass.
type Class struct {
	Name                 string
	Created              time.Time
	Default              bool
	AllowVolumeExpansion bool
}

// Classes is the cache of StorageClasses. Safe for concurrent use.
type Classes struct {
	cache *objcache.Cache[Class]

	mu       sync.Mutex
	defaults map[string]Class
}

// NewClasses builds the cache; Run fills it.
func NewClasses(store *storage.Store, hub *watchhub.Hub, log *slog.Logger) *Classes {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Classes{defaults: map[string]Class{}}
	c.cache = objcache.New(objcache.Config[Class]{Group: storagev1.GroupName, Resource: "storageclasses", Store: store, Hub: hub, Log: log,
		Decode: decodeClass, OnChange: c.onChange})
	return c
}

func decodeClass(raw []byte) (objcache.Key, Class, error) {
	var sc storagev1.StorageClass
	if err := codec.Unmarshal(raw, &sc); err != nil {
		return objcache.Key{}, Class{}, err
	}
	return objcache.Key{"", sc.Name}, Class{Name: sc.Name, Created: sc.CreationTimestamp.Time, Default: schemas.IsDefaultStorageClass(&sc),
		AllowVolumeExpansion: sc.AllowVolumeExpansion != nil && *sc.AllowVolumeExpansion}, nil
}

// onChange keeps the default classes (called with the cache's lock held).
func (c *Classes) onChange(k objcache.Key, _, cur *Class) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case k == objcache.Key{} && cur == nil:
		c.defaults = map[string]Class{}
	case cur == nil || !cur.Default:
		delete(c.defaults, k[1])
	default:
		c.defaults[k[1]] = *cur
	}
}

// Run fills and follows the cache until ctx ends.
func (c *Classes) Run(ctx context.Context) error { return c.cache.Run(ctx) }

// WaitForSync blocks until the first snapshot is in or ctx ends.
func (c *Classes) WaitForSync(ctx context.Context) error {
	select {
	case <-c.cache.Synced():
		return nil
	case <-ctx.Done():
		return fmt.Errorf("volumeadmission: wait for the StorageClass cache: %w", ctx.Err())
	}
}

// Default is kube's GetDefaultClass: of the default classes the newest,
// by name when created at the same time; ok=false when there is none.
func (c *Classes) Default() (Class, bool) {
	c.mu.Lock()
	list := make([]Class, 0, len(c.defaults))
	for _, d := range c.defaults {
		list = append(list, d)
	}
	c.mu.Unlock()
	if len(list) == 0 {
		return Class{}, false
	}
	sort.Slice(list, func(i, j int) bool {
		if list[i].Created.Equal(list[j].Created) {
			return list[i].Name < list[j].Name
		}
		return list[i].Created.After(list[j].Created)
	})
	return list[0], true
}

// Get returns the class, reading etcd on a miss; a missing class is a
// NotFound API error.
func (c *Classes) Get(ctx context.Context, name string) (Class, error) {
	return c.cache.Get(ctx, "", name)
}
