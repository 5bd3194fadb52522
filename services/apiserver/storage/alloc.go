package storage

import (
	"context"
	"fmt"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/schemas/fit"
)

// AllocPrefix holds one ledger per node: the pods bound to it through
// pods/binding and what each requests. It is outside the registry, so it is
// never published on the log; it changes only in the same transaction as a
// binding, which is what makes the overcommit check of a binding atomic.
const AllocPrefix = "/cairn/nodealloc/"

// Allocation is the ledger of one node. Entries of pods that have since
// been deleted or have finished are removed lazily, by the binding that
// finds the node full (see Live): the ledger is never an underestimate.
// It is stored in the compact encoding of EncodeAllocation; ledgers
// written as JSON by earlier versions still decode.
type Allocation struct {
	// Pods by pod storage key.
	Pods map[string]AllocatedPod `json:"pods"`
	// Revision is the ledger's ModRevision, 0 if it does not exist yet.
	Revision events.Revision `json:"-"`
}

// AllocatedPod is one entry of a ledger.
type AllocatedPod struct {
	UID      string        `json:"uid"`
	Requests fit.Resources `json:"requests"`
}

// Total is the sum of the requests in the ledger.
func (a Allocation) Total() fit.Resources {
	var t fit.Resources
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
	return decodeLedger(node, resp.Kvs)
}

// NodeState is what a binding checks a node against: the Node object (a
// nil Value and Revision 0 when it does not exist) and the node's ledger.
type NodeState struct {
	Node  KV
	Alloc Allocation
}

// ReadNodeState reads the Node object and the ledger of node in one round
// trip, at one revision.
func (s *Store) ReadNodeState(ctx context.Context, node string) (NodeState, error) {
	nodeKey, allocKey := Key("", "nodes", "", node), AllocPrefix+node
	resp, err := s.cli.Txn(ctx).Then(clientv3.OpGet(nodeKey), clientv3.OpGet(allocKey)).Commit()
	if err != nil {
		return NodeState{}, fmt.Errorf("storage: read node %s and its allocation: %w", node, err)
	}
	return nodeState(node, resp.Responses)
}

// nodeState decodes the responses of a Get of the node and a Get of its
// ledger.
func nodeState(node string, rs []*etcdserverpb.ResponseOp) (NodeState, error) {
	if len(rs) != 2 || rs[0].GetResponseRange() == nil || rs[1].GetResponseRange() == nil {
		return NodeState{}, fmt.Errorf("storage: read node %s: unexpected transaction response", node)
	}
	var st NodeState
	if kvs := rs[0].GetResponseRange().Kvs; len(kvs) > 0 {
		kv := kvs[0]
		st.Node = KV{Key: string(kv.Key), Value: kv.Value, Revision: events.Revision(kv.ModRevision), CreateRevision: events.Revision(kv.CreateRevision)}
	}
	a, err := decodeLedger(node, rs[1].GetResponseRange().Kvs)
	if err != nil {
		return NodeState{}, err
	}
	st.Alloc = a
	return st, nil
}

func decodeLedger(node string, kvs []*mvccpb.KeyValue) (Allocation, error) {
	if len(kvs) == 0 {
		return Allocation{Pods: map[string]AllocatedPod{}}, nil
	}
	a, err := DecodeAllocation(kvs[0].Value)
	if err != nil {
		return Allocation{}, fmt.Errorf("storage: decode allocation of node %s: %w", node, err)
	}
	a.Revision = events.Revision(kvs[0].ModRevision)
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

// StaleError is the ErrConflict of a Bind: something it compared had
// changed. State is the node and its ledger as they are now and
// PodRevision the pod's ModRevision (0: deleted), read in the same
// transaction, so the caller can decide again without another read.
type StaleError struct {
	State       NodeState
	PodRevision events.Revision
}

func (e *StaleError) Error() string { return ErrConflict.Error() }

// Unwrap makes errors.Is(err, ErrConflict) hold.
func (e *StaleError) Unwrap() error { return ErrConflict }

// Bind commits a binding: the pod (if its revision is still expect), the
// node's ledger a (if it is still at a.Revision) and, on the condition that
// the node is still at nodeRev (0: that the node does not exist). When a
// compare fails it returns a *StaleError (ErrConflict) with the current
// node and ledger; the caller re-reads the pod and decides again.
func (s *Store) Bind(ctx context.Context, podKey string, value []byte, expect events.Revision, node string, nodeRev events.Revision, a Allocation, meta *events.WriteMeta) (events.Revision, error) {
	mop, err := metaOp(podKey, meta)
	if err != nil {
		return 0, err
	}
	ledger := EncodeAllocation(a)
	nodeKey, allocKey := Key("", "nodes", "", node), AllocPrefix+node
	resp, err := s.cli.Txn(ctx).If(
		clientv3.Compare(clientv3.ModRevision(podKey), "=", int64(expect)),
		clientv3.Compare(clientv3.ModRevision(allocKey), "=", int64(a.Revision)),
		clientv3.Compare(clientv3.ModRevision(nodeKey), "=", int64(nodeRev)),
	).Then(clientv3.OpPut(podKey, string(value)), clientv3.OpPut(allocKey, string(ledger)), mop).
		Else(clientv3.OpGet(nodeKey), clientv3.OpGet(allocKey), clientv3.OpGet(podKey, clientv3.WithKeysOnly())).
		Commit()
	if err != nil {
		return 0, fmt.Errorf("storage: bind %s: %w", podKey, err)
	}
	if !resp.Succeeded {
		if len(resp.Responses) != 3 || resp.Responses[2].GetResponseRange() == nil {
			return 0, fmt.Errorf("storage: bind %s: unexpected transaction response", podKey)
		}
		st, err := nodeState(node, resp.Responses[:2])
		if err != nil {
			return 0, err
		}
		stale := &StaleError{State: st}
		if kvs := resp.Responses[2].GetResponseRange().Kvs; len(kvs) > 0 {
			stale.PodRevision = events.Revision(kvs[0].ModRevision)
		}
		return 0, stale
	}
	s.noteCommit(podKey, events.Revision(resp.Header.Revision))
	return events.Revision(resp.Header.Revision), nil
}
