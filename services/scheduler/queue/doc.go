// Package queue is the scheduler's scheduling queue, after kube-scheduler's
// PriorityQueue.
//
// A pod is in exactly one place: the active heap (ready to be tried,
// highest priority first, then the earliest to enter the queue), the
// back-off heap (failed recently; waits 1s doubling per attempt up to 10s),
// the unschedulable pool (fit nowhere; waits for a cluster change), or in
// flight (popped by the scheduler, being tried).
//
// Outcomes of an attempt: Done (bound, or no longer to schedule),
// AddUnschedulable (fit nowhere), AddBackoff (a transient failure such as a
// binding conflict). Cluster changes that could help (a node added or
// updated, a pod deleted or finished) call MoveAllToActiveOrBackoff: every
// unschedulable pod is retried once its back-off has passed. A change that
// happens while a pod is in flight is not lost: if the pod then fails, it
// goes to back-off instead of the pool (kube's moveRequestCycle). Pods in
// the pool are retried after five minutes anyway.
//
// Run flushes expired back-offs into the active heap periodically. All
// methods are safe for concurrent use; Pop blocks.
package queue
