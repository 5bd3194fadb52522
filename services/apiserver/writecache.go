package apiserver

import (
	"sync"

	"github.com/cairn-dev/cairn/services/apiserver/storage"
)

// The write cache: what this apiserver last committed of each recently
// written object (its key, stored value and revisions), so that the next
// update of it (the scheduler's status patch after a create, a binding
// after the ReplicaSet controller's create, a kubelet's status after the
// binding) starts from that instead of reading etcd first, as kube's
// Cacher hands GuaranteedUpdate its watch cache's copy
// (cachedExistingObject). It is only a guess: the update's transaction
// compares the key's ModRevision with the guessed one, and a stale guess
// (a write through another apiserver) costs one failed transaction,
// which returns the current value. Nothing is decided on a guess alone:
// an update that fails, or changes nothing, on a guessed value is tried
// again on one read from etcd (guaranteedUpdate), as kube's
// GuaranteedUpdate does when origStateIsCurrent is false.

// writeCacheSize bounds the cache; the oldest entries are dropped first.
// An entry costs the stored value (a pod: 1-4 KiB).
const writeCacheSize = 8192

// writeCache is the write cache of one Server. The zero value is ready.
type writeCache struct {
	mu   sync.Mutex
	m    map[string]storage.KV
	ring []string // keys in the order they were first put
	next int      // the slot of ring to reuse next, once ring is full
}

// put records kv as the latest committed state of kv.Key.
func (c *writeCache) put(kv storage.KV) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[string]storage.KV, writeCacheSize)
	}
	if _, ok := c.m[kv.Key]; !ok {
		if len(c.ring) < writeCacheSize {
			c.ring = append(c.ring, kv.Key)
		} else {
			delete(c.m, c.ring[c.next])
			c.ring[c.next] = kv.Key
			c.next = (c.next + 1) % writeCacheSize
		}
	}
	c.m[kv.Key] = kv
}

// get returns the last state of key this apiserver committed, if cached.
func (c *writeCache) get(key string) (storage.KV, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	kv, ok := c.m[key]
	return kv, ok
}

// drop forgets key (deleted). Its ring slot stays until reused; a later
// put of the key takes another slot, so that reuse may drop it early.
func (c *writeCache) drop(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, key)
}
