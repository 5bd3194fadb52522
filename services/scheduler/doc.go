// Package scheduler is cairn's scheduler service (`cairn scheduler`, and
// in process in `cairn up`): it consumes pods, nodes and PriorityClasses
// from the log and binds every pending pod whose spec.schedulerName is its
// own ("default-scheduler" unless configured) to a node, through
// pods/binding.
//
// # Flow
//
// Three consumer.Caches (all pods, nodes, priorityclasses) feed an
// incremental framework.Snapshot (bound pods per node, with the indexes
// that make inter-pod affinity and topology spread cost what the pod at
// hand concerns rather than the size of the cluster) and the scheduling
// queue (pending pods, by priority: spec.priority, else the pod's
// PriorityClass, else the global default class). One loop pops a pod and
// runs the framework (package plugins: kube-scheduler's default filters
// and scores) over the snapshot. On success the pod is assumed (counted on
// the node at once, so the next decisions see it without waiting for the
// log) and bound by one of Config.Workers long-lived workers, through
// pods/binding; the binding carries the pod's scheduling cause
// (consumer.WithCause), and a Scheduled event ("Successfully assigned
// ns/pod to node") is recorded. A successful binding writes nothing else:
// the apiserver sets PodScheduled=True itself. When the pod fits nowhere,
// preemption looks for victims of strictly lower priority: if found they
// are deleted gracefully and the pod's status.nominatedNodeName set
// (lower-priority pods then leave that room alone); the pod gets
// PodScheduled=False, reason Unschedulable, with kube-scheduler's message,
// and a FailedScheduling event, and waits in the queue for a cluster change
// (node added or changed, pod deleted or finished).
//
// Events go through client-go's EventCorrelator (a repeated event bumps
// the count of the one already written, by PATCH; similar ones are
// combined; a per-object spam filter) and a queue to a few writers whose
// own client is limited to Config.EventQPS (50 by default, as
// kube-scheduler's client): in a burst they wait rather than take etcd's
// time from bindings, and only a full queue (32,768) drops one
// (Stats.EventsDropped). The apiserver client keeps an idle connection per
// worker (client.go): client-go's default transport would dial for most
// requests.
//
// # Replicas
//
// Replicas run active-active. By default every replica may schedule every
// pod (optimistic, shared-state scheduling as in Omega): the apiserver
// settles races with 409 Conflict. A conflict because the pod is already
// bound or gone ends the attempt; a binding refused because it would
// overcommit the node (a 409 with a fit.CauseOvercommitted cause, told
// apart by fit.IsOvercommitted, never by its message) means this replica's
// view is stale: it waits until its pod cache has read the log up to now
// and retries the pod at once. With Config.Sharded, replicas split the
// pods instead (events/consumer/shard leases), and each schedules only its
// own; it holds the partition of a pod from its decision until its binding
// is refused or on the log (guards.go), so a partition handed over never
// has a pod bound twice. Sharded replicas still share the nodes: the
// overcommit check settles their races.
//
// The apiserver checks only resources. Required pod anti-affinity between
// two pods placed at the same moment by two replicas (either mode) can be
// broken by the bindings; the replica whose binding came second in the log
// finds it when the log confirms the binding and, as a descheduler would,
// evicts its pod if a controller owns it (the controller recreates it, and
// it is placed again knowing the other), or leaves a bare pod in place with
// an AntiAffinityViolated Warning event (deschedule.go; Stats.Violations,
// Stats.Descheduled). So the cluster converges to satisfied anti-affinity
// for controlled pods, but may run two conflicting pods for a moment. Not
// checked after the fact: DoNotSchedule topology spread (two replicas may
// each add a pod to the same domain and exceed maxSkew by one per replica)
// and required pod affinity (which concurrent placements cannot break).
package scheduler
