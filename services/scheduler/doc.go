// Package scheduler is cairn's scheduler service (`cairn scheduler`, and
// in process in `cairn up`): it consumes pods, nodes and PriorityClasses
// from the log and binds every pending pod whose spec.schedulerName is its
// own ("default-scheduler" unless configured) to a node, through
// pods/binding.
//
// # Flow
//
// Three consumer.Caches (all pods, nodes, priorityclasses) feed an
// incremental framework.Snapshot (bound pods per node) and the scheduling
// queue (pending pods, by priority: spec.priority, else the pod's
// PriorityClass, else the global default class). One loop pops a pod and
// runs the framework (package plugins: kube-scheduler's default filters and
// scores) over the snapshot. On success the pod is assumed (counted on the
// node at once, so the next decisions see it without waiting for the log)
// and bound asynchronously (Config.Workers in flight); the binding carries
// the pod's scheduling cause (consumer.WithCause), and a Scheduled event
// ("Successfully assigned ns/pod to node") is written. When the pod fits
// nowhere, preemption looks for victims of strictly lower priority: if
// found they are deleted gracefully and the pod's status.nominatedNodeName
// set (lower-priority pods then leave that room alone); the pod gets
// PodScheduled=False, reason Unschedulable, with kube-scheduler's message,
// and a FailedScheduling event, and waits in the queue for a cluster change
// (node added or changed, pod deleted or finished).
//
// # Replicas
//
// Replicas run active-active. By default every replica may schedule every
// pod (optimistic, shared-state scheduling as in Omega): the apiserver
// settles races with 409 Conflict. A conflict because the pod is already
// bound or gone ends the attempt; a binding refused because it would
// overcommit the node ("binding rejected: node ...") means this replica's
// view is stale: it waits until its pod cache has read the log up to now
// and retries the pod at once. Only resources are checked by the
// apiserver: required pod anti-affinity between two pods placed at the same
// moment by two replicas can be violated. With Config.Sharded, replicas
// split the pods instead (events/consumer/shard leases), and each schedules
// only its own.
package scheduler
