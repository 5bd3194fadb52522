package apiserver

import (
	"errors"
	"math/rand/v2"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/schemas"
	"github.com/cairn-dev/cairn/schemas/fit"
	"github.com/cairn-dev/cairn/services/apiserver/storage"
)

// The overcommit check of pods/binding.
//
// Several schedulers may bind at once, each from its own, possibly stale,
// view of the cluster (optimistic, shared-state scheduling as in Omega).
// The apiserver is where their decisions meet: a binding commits only if the
// node still has room, and "still" is checked in the same etcd transaction
// that writes the binding. Each node has a ledger (storage.Allocation) of
// the pods bound to it; the transaction compares the ledger's and the
// node's revisions, so two bindings to one node serialise and the loser
// re-checks against the state its failed transaction returned. What a
// binding checks against comes from the binding cache (bindcache.go):
// the compares, not the cache, make the check exact.
// The check is the scheduler's own rule, fit.Fits. A binding that does not
// fit is refused with 409 Conflict carrying fit.CauseOvercommitted causes
// (fit.Overcommitted), and the scheduler puts the pod back in its queue.

// maxBindAttempts bounds the transactions commitBinding tries while only
// the node or its ledger changes under it; past it, or when the pod itself
// changed, guaranteedUpdate re-reads the pod and calls it again.
const maxBindAttempts = 8

// commitBinding writes a binding (the pod with spec.nodeName set, encoded
// in val) together with the node's ledger, checking the node's room
// against the binding cache (see bindcache.go). It returns
// storage.ErrConflict when the pod changed, and guaranteedUpdate retries.
func (s *Server) commitBinding(q *request, kv storage.KV, pod *corev1.Pod, val []byte) (events.Revision, error) {
	ctx := q.ctx()
	nodeName := pod.Spec.NodeName
	e := s.bindings().entry(nodeName)
	if err := e.acquire(ctx); err != nil {
		return 0, err
	}
	defer e.release()
	want := fit.PodRequests(pod, fit.Options{})
	read := func() error {
		st, err := s.store.ReadNodeState(ctx, nodeName)
		if err != nil {
			e.valid = false
			return err
		}
		return e.set(st)
	}
	fresh := false // e holds what etcd held during this request
	for attempt := 0; ; attempt++ {
		if !e.valid {
			if err := read(); err != nil {
				return 0, err
			}
			fresh = true
		}
		if e.overcommit(want) != nil {
			// Refuse only on what etcd holds now, and only after
			// pruning: the ledger may hold pods that are gone or
			// finished.
			if !fresh {
				if err := read(); err != nil {
					return 0, err
				}
			}
			if e.overcommit(want) != nil {
				err := s.pruneAllocation(q, &e.alloc)
				e.total = e.alloc.Total()
				if err != nil {
					return 0, err
				}
				if lacks := e.overcommit(want); lacks != nil {
					return 0, fit.Overcommitted(q.res.GroupResource(), pod.Name, nodeName, lacks)
				}
			}
		}
		prev, replaced := e.alloc.Pods[kv.Key]
		e.alloc.Pods[kv.Key] = storage.AllocatedPod{UID: string(pod.UID), Requests: want}
		e.valid = false // until etcd says which version of the ledger holds
		rev, err := s.store.Bind(ctx, kv.Key, val, kv.Revision, nodeName, e.room.rev, e.alloc, s.newWriteMeta(q, q.info.Verb))
		if err == nil {
			e.alloc.Revision = rev
			if replaced {
				e.total = e.total.Sub(prev.Requests)
			}
			e.total = e.total.Add(want)
			e.valid = true
			return rev, nil
		}
		var stale *storage.StaleError
		if !errors.As(err, &stale) {
			return 0, err
		}
		if err := e.set(stale.State); err != nil {
			return 0, err
		}
		fresh = true
		if stale.PodRevision != kv.Revision || attempt+1 >= maxBindAttempts {
			return 0, err
		}
		// Another writer (a binding through another apiserver, a node
		// update) committed first: decide again on the state the failed
		// transaction returned, after a short jittered pause from the
		// second time on, so that replicas binding to one node spread out.
		if attempt > 0 {
			d := time.Duration(rand.Int64N(int64(50*time.Microsecond) << min(attempt, 6)))
			select {
			case <-time.After(d):
			case <-ctx.Done():
				return 0, ctx.Err()
			}
		}
	}
}

// maxLedgerWithoutNode bounds the ledger of a node that does not exist:
// such a node has no allocatable to check against, and a binding to it
// is refused as "Too many pods" only past this many.
const maxLedgerWithoutNode = 256

// overcommit is what the node lacks for a pod requesting want, given the
// pods of its ledger and their total (fit.Fits); nil if the pod fits.
func (e *nodeLedger) overcommit(want fit.Resources) []fit.Insufficient {
	pods := len(e.alloc.Pods)
	if e.room.rev == 0 {
		if pods < maxLedgerWithoutNode {
			return nil
		}
		return []fit.Insufficient{{Resource: corev1.ResourcePods, Reason: fit.ReasonTooManyPods,
			Requested: 1, Used: int64(pods), Capacity: maxLedgerWithoutNode}}
	}
	return fit.Fits(want, fit.Node{Allocatable: e.room.alloc, Requested: e.total, Pods: pods})
}

// pruneAllocation drops the ledger entries of pods that no longer hold
// resources on the node: deleted, replaced by a new pod of the same name,
// or finished (Succeeded or Failed). Such a pod never holds them again, so
// pruning is safe against any concurrent change; the binding's transaction
// still compares the ledger's revision.
func (s *Server) pruneAllocation(q *request, a *storage.Allocation) error {
	live, err := s.store.Live(q.ctx(), *a)
	if err != nil {
		return err
	}
	res := s.coreResource("pods")
	for key, val := range live {
		if val == nil {
			delete(a.Pods, key)
			continue
		}
		obj, err := decodeStored(res, storage.KV{Key: key, Value: val})
		if err != nil {
			return err
		}
		p := obj.(*corev1.Pod)
		if string(p.UID) != a.Pods[key].UID || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			delete(a.Pods, key)
		}
	}
	return nil
}

// coreResource is a core/v1 resource of the registry, which always has
// nodes and pods.
func (s *Server) coreResource(plural string) *schemas.Resource {
	res, ok := s.reg.Lookup("", "v1", plural)
	if !ok {
		panic("apiserver: the registry has no core/v1 " + plural)
	}
	return res
}
