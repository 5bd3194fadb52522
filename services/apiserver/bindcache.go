package apiserver

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	sigsjson "sigs.k8s.io/json"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/schemas/fit"
	"github.com/cairn-dev/cairn/services/apiserver/storage"
)

// The binding cache: what the overcommit check last saw of each node the
// apiserver bound pods to, so that a binding usually commits without
// reading the node or its ledger. It is only a guess: the transaction of a
// binding compares the node's and the ledger's revisions with the cached
// ones, as it compared the ones it read before the cache existed, and a
// stale entry costs one failed transaction, which returns the current
// state (storage.StaleError) to check against again. A refusal is never
// decided on the cache alone.

// maxCachedNodes bounds the cache; past it an arbitrary entry is dropped.
// An entry costs ~150 bytes per pod on the node.
const maxCachedNodes = 8192

// bindCache is the binding cache of one Server. The zero value is ready.
type bindCache struct {
	mu    sync.Mutex
	nodes map[string]*nodeLedger
}

// nodeLedger is the cached state of one node. Bindings to the node take
// its lock to check and commit: two bindings to one node would conflict
// in etcd anyway, so within one apiserver they queue instead.
type nodeLedger struct {
	lock chan struct{}

	// Guarded by lock.
	valid bool // room and alloc are as etcd held them at some revision
	room  nodeRoom
	alloc storage.Allocation
	total fit.Resources // alloc.Total()
}

// nodeRoom is what the overcommit check needs of a Node.
type nodeRoom struct {
	// rev is the Node's ModRevision; 0: there is no such node.
	rev   events.Revision
	alloc fit.Allocatable
}

// entry returns the cache entry of node, creating it if needed.
func (c *bindCache) entry(node string) *nodeLedger {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.nodes[node]; ok {
		return e
	}
	if c.nodes == nil {
		c.nodes = map[string]*nodeLedger{}
	}
	if len(c.nodes) >= maxCachedNodes {
		// A binding holding the dropped entry finishes with it; the
		// next one starts a new entry, which it fills by reading.
		for k := range c.nodes {
			delete(c.nodes, k)
			break
		}
	}
	e := &nodeLedger{lock: make(chan struct{}, 1)}
	c.nodes[node] = e
	return e
}

func (e *nodeLedger) acquire(ctx context.Context) error {
	select {
	case e.lock <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (e *nodeLedger) release() { <-e.lock }

// set replaces the entry with state read from etcd.
func (e *nodeLedger) set(st storage.NodeState) error {
	e.valid = false
	room, err := roomOf(st.Node)
	if err != nil {
		return err
	}
	e.room, e.alloc, e.total = room, st.Alloc, st.Alloc.Total()
	e.valid = true
	return nil
}

// roomOf reads the allocatable resources of a stored Node (Revision 0: no
// node), without decoding the rest of it.
func roomOf(kv storage.KV) (nodeRoom, error) {
	if kv.Revision == 0 {
		return nodeRoom{}, nil
	}
	var n struct {
		Status struct {
			Allocatable corev1.ResourceList `json:"allocatable"`
		} `json:"status"`
	}
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(kv.Value, &n); err != nil {
		return nodeRoom{}, fmt.Errorf("apiserver: decode %s: %w", kv.Key, err)
	}
	return nodeRoom{rev: kv.Revision, alloc: fit.NodeAllocatable(n.Status.Allocatable)}, nil
}

// bindings is the Server's binding cache.
func (s *Server) bindings() *bindCache { return &s.binds }
