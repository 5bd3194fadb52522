package persistentvolume

import (
	"strconv"
	"sync"

	"github.com/cairn-dev/cairn/events/consumer"
)

// overlay keeps the objects a controller wrote until its cache holds
// them or something newer: kube's PV controller updates its own caches
// with every object it writes for the same reason. Safe for concurrent
// use.
type overlay[T consumer.Object] struct {
	mu   sync.Mutex
	objs map[string]T
}

func newOverlay[T consumer.Object]() *overlay[T] { return &overlay[T]{objs: map[string]T{}} }

// store records obj, which the apiserver just returned from a write.
func (o *overlay[T]) store(obj T) {
	o.mu.Lock()
	defer o.mu.Unlock()
	key := consumer.KeyOf(obj)
	if old, ok := o.objs[key]; ok && rv(old) > rv(obj) {
		return
	}
	o.objs[key] = obj
}

func (o *overlay[T]) forget(key string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.objs, key)
}

// newest returns the written object if it is newer than cached (the
// cache's object, found says whether it had one), else cached, dropping a
// written object the cache has caught up with. The controller only updates
// objects, so one the cache does not hold was deleted.
func (o *overlay[T]) newest(key string, cached T, found bool) (T, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	w, ok := o.objs[key]
	if !ok {
		return cached, found
	}
	if !found || rv(cached) >= rv(w) || cached.GetUID() != w.GetUID() {
		delete(o.objs, key)
		return cached, found
	}
	return w, true
}

// rv is an object's resourceVersion, an etcd revision.
func rv(obj consumer.Object) int64 {
	n, _ := strconv.ParseInt(obj.GetResourceVersion(), 10, 64)
	return n
}
