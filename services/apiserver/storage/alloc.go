package storage

import (
	"context"
	"encoding/json"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/schemas"
)

// AllocPrefix holds one ledger per node: the pods bound to it through
// pods/binding and what each requests. It is outside the registry, so it is
// never published on the log; it changes only in the same transaction as a
// binding, which is what makes the overcommit check of a binding atomic.
const AllocPrefix = "/cairn/nodealloc/"

// Allocation is the ledger of one node. Entries of pods that have since
// been deleted or have finished are removed lazily, by the binding that
// finds the node full (see Prune): the ledger is never an underestimate.
type Allocation struct {
	// Pods by pod storage key.
	Pods map[string]AllocatedPod `json:"pods"`
	// Revision is the ledger's ModRevision, 0 if it does not exist yet.
	Revision events.Revision `json:"-"`
}

// AllocatedPod is one entry of a ledger.
type AllocatedPod struct {
	UID      string           `json:"uid"`
	Requests schemas.Requests `json:"requests"`
}

// Total is the sum of the requests in the ledger.
func (a Allocation) Total() schemas.Requests {
	var t schemas.Requests
	for _, p := range a.Pods {
		t = t.Add(p.Requests)
	}
	return t
}

// Allocation reads the ledger of node.
func (s *Store) Allocation(ctx context.Context, node string) (Allocation, error) {
	resp, err := s.cli.Get(ctx, AllocPrefix+node)
	if err != nil {
		return Allocation{}, fmt.Errorf("storage: read allocation of node %s: %w", node, err)
	}
	a := Allocation{Pods: map[string]AllocatedPod{}}
	if len(resp.Kvs) == 0 {
		return a, nil
	}
	if err := json.Unmarshal(resp.Kvs[0].Value, &a); err != nil {
		return Allocation{}, fmt.Errorf("storage: decode allocation of node %s: %w", node, err)
	}
	if a.Pods == nil {
		a.Pods = map[string]AllocatedPod{}
	}
	a.Revision = events.Revision(resp.Kvs[0].ModRevision)
	return a, nil
}

// Live reads, in one round trip, the current value of each pod key in the
// ledger; a key that no longer exists maps to nil. The caller decides which
// entries are stale (deleted, replaced by a pod with another uid, finished).
func (s *Store) Live(ctx context.Context, a Allocation) (map[string][]byte, error) {
	out := make(map[string][]byte, len(a.Pods))
	keys := make([]string, 0, len(a.Pods))
	for k := range a.Pods {
		keys = append(keys, k)
	}
	// etcd limits the operations of one transaction (128 by default).
	const batch = 100
	for len(keys) > 0 {
		n := min(batch, len(keys))
		ops := make([]clientv3.Op, n)
		for i, k := range keys[:n] {
			ops[i] = clientv3.OpGet(k)
		}
		resp, err := s.cli.Txn(ctx).Then(ops...).Commit()
		if err != nil {
			return nil, fmt.Errorf("storage: read allocated pods: %w", err)
		}
		for i, k := range keys[:n] {
			out[k] = nil
			if r := resp.Responses[i].GetResponseRange(); r != nil && len(r.Kvs) > 0 {
				out[k] = r.Kvs[0].Value
			}
		}
		keys = keys[n:]
	}
	return out, nil
}

// Bind commits a binding: the pod (if its revision is still expect), the
// node's ledger (if it is still at a.Revision) and, when nodeRev is not 0,
// on the condition that the node is still at nodeRev. On ErrConflict the
// caller re-reads everything and decides again.
func (s *Store) Bind(ctx context.Context, podKey string, value []byte, expect events.Revision, node string, nodeRev events.Revision, a Allocation, meta *events.WriteMeta) (events.Revision, error) {
	mop, err := metaOp(podKey, meta)
	if err != nil {
		return 0, err
	}
	ledger, err := json.Marshal(a)
	if err != nil {
		return 0, fmt.Errorf("storage: encode allocation of node %s: %w", node, err)
	}
	allocKey := AllocPrefix + node
	cmps := []clientv3.Cmp{
		clientv3.Compare(clientv3.ModRevision(podKey), "=", int64(expect)),
		clientv3.Compare(clientv3.ModRevision(allocKey), "=", int64(a.Revision)),
	}
	if nodeRev != 0 {
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(Key("", "nodes", "", node)), "=", int64(nodeRev)))
	}
	resp, err := s.cli.Txn(ctx).If(cmps...).
		Then(clientv3.OpPut(podKey, string(value)), clientv3.OpPut(allocKey, string(ledger)), mop).
		Commit()
	if err != nil {
		return 0, fmt.Errorf("storage: bind %s: %w", podKey, err)
	}
	if !resp.Succeeded {
		return 0, ErrConflict
	}
	return events.Revision(resp.Header.Revision), nil
}
