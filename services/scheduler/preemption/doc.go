// Package preemption finds, for a pod that fits no node, the node where
// evicting pods of strictly lower priority makes room, and the victims: the
// fewest, least important pods (kube-scheduler's DefaultPreemption
// PostFilter, without PodDisruptionBudgets). It only decides; the
// scheduler evicts the victims (graceful delete), records the pod's
// status.nominatedNodeName, and keeps the room for the pod by counting it
// on that node for pods of lower priority (framework.Snapshot.SetNominated)
// until it is bound.
//
// When no node qualifies, Result.Message is what kube-scheduler appends to
// the FitError, e.g. "preemption: 0/3 nodes are available: 1 No preemption
// victims found for incoming pod, 2 Preemption is not helpful for
// scheduling."
package preemption
