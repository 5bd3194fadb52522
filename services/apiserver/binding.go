package apiserver

import (
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/schemas"
	"github.com/cairn-dev/cairn/services/apiserver/storage"
)

// The overcommit check of pods/binding.
//
// Several schedulers may bind at once, each from its own, possibly stale,
// view of the cluster (optimistic, shared-state scheduling as in Omega).
// The apiserver is where their decisions meet: a binding commits only if the
// node still has room, and "still" is checked in the same etcd transaction
// that writes the binding. Each node has a ledger (storage.Allocation) of
// the pods bound to it; the transaction compares the ledger's revision, so
// two bindings to one node serialise and the loser re-reads and re-checks.
// A binding that does not fit is refused with 409 Conflict, and the
// scheduler puts the pod back in its queue.

// errOvercommit prefixes the message of a refused binding.
const errOvercommit = "binding rejected: node"

// commitBinding writes a binding (the pod with spec.nodeName set, encoded
// in val) together with the node's ledger. It returns storage.ErrConflict
// when something it read changed, and guaranteedUpdate retries.
func (s *Server) commitBinding(q *request, kv storage.KV, pod *corev1.Pod, val []byte) (events.Revision, error) {
	ctx := q.ctx()
	nodeName := pod.Spec.NodeName
	var node *corev1.Node
	var nodeRev events.Revision
	nkv, err := s.store.Get(ctx, storage.Key("", "nodes", "", nodeName))
	switch {
	case errors.Is(err, storage.ErrNotFound):
		// Kubernetes binds to a node that does not exist (yet); so do we,
		// without a capacity to check against.
	case err != nil:
		return 0, err
	default:
		obj, err := decodeStored(s.coreResource("nodes"), nkv)
		if err != nil {
			return 0, err
		}
		node, nodeRev = obj.(*corev1.Node), nkv.Revision
	}
	alloc, err := s.store.Allocation(ctx, nodeName)
	if err != nil {
		return 0, err
	}
	want := schemas.PodRequests(pod)
	if msg := overcommit(node, alloc, want); msg != "" {
		// The ledger may hold pods that are gone or finished: prune it
		// and look again before refusing.
		if err := s.pruneAllocation(q, &alloc); err != nil {
			return 0, err
		}
		if msg := overcommit(node, alloc, want); msg != "" {
			return 0, apierrors.NewConflict(q.res.GroupResource(), pod.Name,
				fmt.Errorf("%s %s: %s", errOvercommit, nodeName, msg))
		}
	}
	alloc.Pods[kv.Key] = storage.AllocatedPod{UID: string(pod.UID), Requests: want}
	return s.store.Bind(ctx, kv.Key, val, kv.Revision, nodeName, nodeRev, alloc, s.newWriteMeta(q, q.info.Verb))
}

// maxLedgerWithoutNode bounds the ledger of a node that does not exist, which
// has no pod capacity to trigger pruning.
const maxLedgerWithoutNode = 256

// overcommit says what the node lacks for a pod requesting want, in the
// words of the scheduler's NodeResourcesFit ("Insufficient cpu"), or "" if
// it fits.
func overcommit(node *corev1.Node, a storage.Allocation, want schemas.Requests) string {
	if node == nil {
		if len(a.Pods) >= maxLedgerWithoutNode {
			return "too many pods"
		}
		return ""
	}
	alloc := node.Status.Allocatable
	var lacks []string
	if maxPods, ok := alloc[corev1.ResourcePods]; ok && int64(len(a.Pods))+1 > maxPods.Value() {
		lacks = append(lacks, "Too many pods")
	}
	have := schemas.ResourceRequests(alloc)
	used := a.Total()
	check := func(name string, want, used, have int64, present bool) {
		if want > 0 && (!present || used+want > have) {
			lacks = append(lacks, fmt.Sprintf("Insufficient %s (requested %d, allocated %d of %d)", name, want, used, have))
		}
	}
	_, hasCPU := alloc[corev1.ResourceCPU]
	_, hasMem := alloc[corev1.ResourceMemory]
	_, hasEph := alloc[corev1.ResourceEphemeralStorage]
	check("cpu", want.MilliCPU, used.MilliCPU, have.MilliCPU, hasCPU)
	check("memory", want.Memory, used.Memory, have.Memory, hasMem)
	check("ephemeral-storage", want.EphemeralStorage, used.EphemeralStorage, have.EphemeralStorage, hasEph)
	return strings.Join(lacks, ", ")
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
