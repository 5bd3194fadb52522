// Package daemonset is the DaemonSet controller: it keeps one pod of every
// apps/v1 DaemonSet on each node that should run it, rolls template
// changes out as the update strategy says, records the template history
// in ControllerRevisions, and reports what it sees in status. It behaves
// as kube-controller-manager's pkg/controller/daemon.
//
// # Which nodes
//
// A node should run the DaemonSet's pod when it is the template's
// nodeName (if it names one), matches its nodeSelector and required node
// affinity (the scheduler's own NodeAffinity predicate), and has no
// NoSchedule or NoExecute taint the pod does not tolerate. Every daemon
// pod tolerates, as kube's: node.kubernetes.io/not-ready and
// unreachable (NoExecute), disk-pressure, memory-pressure, pid-pressure
// and unschedulable (NoSchedule), and network-unavailable (NoSchedule)
// for hostNetwork pods. An untolerated NoSchedule taint keeps a new pod
// off but lets a running one stay; an untolerated NoExecute taint removes
// it.
//
// # Pods
//
// Pods are made from the template with the default tolerations, the
// labels controller-revision-hash (the current revision's hash) and
// pod-template-generation (the deprecated.daemonset.template.generation
// annotation), and a required node affinity replaced by the single term
// `metadata.name In [NODE]`: the default scheduler binds them, as in kube
// since 1.12; the controller never sets nodeName. A round (Reconcile):
//
//  1. claims pods through package podclaim (adopting matching orphans
//     after a fresh read proves the DaemonSet is not being deleted,
//     releasing owned ones that stop matching) and ControllerRevisions
//     the same way, with one fresh read for both;
//  2. finds or creates the revision of the current template (name
//     NAME-HASH, hash of the template and status.collisionCount as
//     kube's, data the strategic merge patch kubectl rollout undo
//     applies) and renumbers it to be the newest;
//  3. if its expectations are satisfied: creates a pod on each node that
//     should run one and has none, deletes pods on nodes that should not
//     run them or that no longer exist (kube leaves bound pods of deleted
//     nodes to the pod garbage collector, which cairn does not have),
//     extra pods of a node (keeping the oldest, or with surge the old and
//     new pair while the new one is not yet available), succeeded pods
//     (Normal SucceededDaemonPod) and failed pods, with a per-node
//     exponential back-off (1 s doubling to 15 min) and a Warning
//     FailedDaemonPod Event; creates go in slow-start batches
//     (1, 2, 4, ...), at most 250 creates and 250 deletes a round;
//  4. with RollingUpdate, replaces old pods: without maxSurge, deletes
//     old pods while fewer than maxUnavailable (rounded up) of the nodes
//     lack an available pod, and step 3 of a later round recreates them;
//     with maxSurge, creates new pods beside available old ones, at most
//     maxSurge at a time, and deletes each old pod once the new one on
//     its node is available (minReadySeconds). OnDelete replaces nothing:
//     deleted pods come back with the new template;
//  5. deletes the oldest old revisions beyond revisionHistoryLimit that
//     no pod runs any more;
//  6. writes status: desiredNumberScheduled, currentNumberScheduled,
//     numberMisscheduled, numberReady, updatedNumberScheduled,
//     numberAvailable, numberUnavailable, observedGeneration (only from a
//     round whose expectations were satisfied) and collisionCount.
//
// # Expectations, caches and sharding
//
// As in package replicaset: a round records the creates and deletes it
// makes before making them, and no round acts on a DaemonSet until the pod
// cache has seen them (or five minutes passed). Pod and ControllerRevision
// caches are Partitioned: with a sharded controller manager, a replica
// receives only the pods and revisions of the DaemonSets it owns (their
// controller reference puts them on the DaemonSet's partition). Nodes and
// DaemonSets are read in full; a node event queues the DaemonSets whose
// placement on it changes (heartbeats are ignored).
//
// # Causation and Events
//
// Every write is made with the round's ctx, which carries the event that
// queued the DaemonSet. Events (source daemonset-controller) on the
// DaemonSet: Normal SuccessfulCreate "Created pod: NAME", SuccessfulDelete
// "Deleted pod: NAME"; Warning FailedCreate "Error creating: ...",
// FailedDelete "Error deleting: ...", FailedDaemonPod, and SelectingAll
// for an empty selector; Normal SucceededDaemonPod.
package daemonset
