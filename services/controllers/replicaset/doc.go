// Package replicaset is the ReplicaSet controller: it keeps, for every
// apps/v1 ReplicaSet, spec.replicas active pods made from spec.template, and
// reports what it sees in status. It behaves as kube-controller-manager's
// pkg/controller/replicaset.
//
// # Reconcile
//
// A ReplicaSet is reconciled (Controller.Reconcile) whenever it or one of
// its pods changes. One round:
//
//  1. Claims pods: pods in its namespace whose labels match spec.selector
//     and that have no controller are adopted (an ownerReference with
//     controller: true is patched in, after a fresh GET proves the
//     ReplicaSet is not being deleted); pods it controls whose labels stop
//     matching are released (the ownerReference is patched out).
//  2. If its expectations are satisfied and it is not being deleted,
//     creates or deletes pods so that the active ones (not terminating, not
//     Succeeded or Failed) number spec.replicas. Creates go in slow-start
//     batches (1, 2, 4, ...) and stop at the first failing batch; at most
//     500 pods are created or deleted per round (kube's burstReplicas).
//     Pods are named <name>-<5 random chars> (generateName) and carry the
//     template's labels, annotations and finalizers. Deletes take the least
//     useful pods first (see rankPods): unscheduled, then Pending, Unknown,
//     Running; not ready; lower pod-deletion-cost; more pods of the same
//     owner on their node; ready for less time; more restarts; newer.
//  3. Writes status (replicas, fullyLabeledReplicas, readyReplicas,
//     availableReplicas, terminatingReplicas, observedGeneration and the
//     ReplicaFailure condition) when it changed.
//
// # Expectations
//
// The caches lag the writes the controller makes. Without a guard, a second
// round started before the pod cache shows the pods the first round created
// would create them again. So, like kube's ControllerExpectations, a round
// records how many creates and which deletes it expects before it makes
// them, the pod cache's handlers lower the counts as the ADDED and DELETED
// events (or a deletionTimestamp) come in, and no round creates or deletes
// pods for a ReplicaSet while its expectations are unsatisfied. Failed
// writes lower the expectations at once. Expectations expire after five
// minutes, so a lost event cannot wedge a ReplicaSet; a round that finds
// them unsatisfied asks to be requeued when they expire.
//
// # Causation
//
// Every write is made with the ctx of the round, which carries the event
// that queued the ReplicaSet: a pod created because spec.replicas went up
// has that update's event id as its causationID.
//
// # Events
//
// As kube's pod control (source replicaset-controller), on the ReplicaSet:
// Normal SuccessfulCreate "Created pod: NAME" and SuccessfulDelete "Deleted
// pod: NAME" for each pod, Warning FailedCreate "Error creating: ..." and
// FailedDelete "Error deleting: ..." for failed writes. They are written by
// an eventrecord.Recorder, with a rate-limited client of its own, so a
// burst of creates is never slowed by its Events; its correlator combines
// similar ones (a ReplicaSet scaled to 100 writes about 25 Events, not 100).
package replicaset
