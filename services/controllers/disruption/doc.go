// Package disruption is the disruption controller: it keeps the status of
// every PodDisruptionBudget (policy/v1) up to date, as
// kube-controller-manager's disruption controller does, so that the
// apiserver's pods/eviction can tell whether an eviction would break a
// budget.
//
// # What it computes
//
// For a budget, the pods are those of its namespace that its selector
// matches (a null selector matches none, an empty one all). Then:
//
//   - expectedPods: with minAvailable as a number, the number of pods; with
//     maxUnavailable or a percentage, the sum of the replicas of the pods'
//     controllers (a ReplicaSet, or the Deployment that controls it), each
//     counted once. A pod without a controller, or whose controller cairn
//     does not know, makes the budget fail safe: no disruption allowed,
//     condition DisruptionAllowed False with reason SyncFailed, and a
//     Warning Event (NoControllerRef, NoControllers) on the budget.
//   - desiredHealthy: minAvailable (scaled and rounded up for a
//     percentage), or expectedPods less maxUnavailable (likewise).
//   - currentHealthy: the pods that are Ready, not being deleted, and not
//     in disruptedPods.
//   - disruptionsAllowed: currentHealthy less desiredHealthy, at least 0
//     (0 when no pod is expected).
//   - disruptedPods: the apiserver adds a pod there when it lets an
//     eviction through; the controller drops it once the pod is being
//     deleted, or two minutes (DeletionTimeout) after the eviction, with a
//     Warning Event NotDeleted on the pod in that case.
//   - the condition DisruptionAllowed (SufficientPods, InsufficientPods)
//     and observedGeneration.
//
// A budget without matching pods gets the Normal Event NoPods.
//
// # What it watches
//
// Budgets, and pods: a pod's change queues the budgets of its namespace
// whose selector matches it. The ReplicaSet and Deployment caches are only
// read, for the scales. In a scaled-out controller manager the pod cache
// of a replica holds only some pods (consumer.Cache.Partial); the
// controller then lists a budget's pods through the apiserver and looks
// again every PartialResync, since other replicas' pods do not queue it.
package disruption
