// Package gc is the garbage collector: it deletes objects whose owners are
// gone, following metadata.ownerReferences, as kube-controller-manager's
// garbage collector does.
//
// # What it watches
//
// When its Manager runs it, the collector asks discovery for every resource
// the apiserver serves that can be listed, watched and deleted, and asks
// the Manager for one cache per resource (consumer.MetaFor), each with an
// extra index over the UIDs of all its ownerReferences (not only the
// controller's): the dependents of an owner are ByIndex(IndexOwnerUID,
// uid) over every cache. A resource another controller of the process has
// a typed cache of (the controller manager's pods, ReplicaSets and
// Deployments) is read from that cache, through its metadata, so that each
// of its events is delivered and decoded once per process rather than
// twice; the others get a cache of *metav1.PartialObjectMetadata (only the
// metadata is decoded, the collector needs nothing else). The Manager
// reports not ready until they exist (Manager.Starting).
// Each resource has its own consumer.Controller keyed "namespace/name", so
// the Manager's shard partitions the work as for any controller.
//
// Custom resources come and go at run time: the collector watches the
// CustomResourceDefinitions and rediscovers on each change (and every 30 s,
// as kube's GC resyncs its monitors). A resource that appears gets a
// metadata cache and a gc-<resource> controller of the collector's own
// (the Manager's caches cannot be stopped), so custom objects are handled
// as owners and as dependents; one no longer served is dropped and its
// cache and controller stopped.
//
// # The three propagation policies
//
// The apiserver implements the first half of a delete: with
// propagationPolicy Foreground it adds the finalizer "foregroundDeletion",
// with Orphan the finalizer "orphan", and with Background (or none) it
// deletes the owner at once. The collector does the rest:
//
//   - Background: when an owner is deleted, its dependents are queued. A
//     dependent none of whose owners exists any more is deleted (with
//     Background, or the policy its own finalizers ask for); a dependent
//     with an owner left loses only its references to the owners that are
//     gone.
//   - Foreground: an owner being deleted with "foregroundDeletion" queues
//     its dependents; each one with no other live owner is deleted (with
//     Foreground itself when it has dependents of its own). The owner waits
//     for the dependents whose reference has blockOwnerDeletion: when none
//     is left, the collector removes the finalizer and the apiserver
//     deletes the owner.
//   - Orphan: an owner being deleted with "orphan" has the references to it
//     removed from all its dependents, then the finalizer removed.
//
// # Stale caches
//
// Caches can lag. The collector therefore never deletes on the word of a
// cache alone: an owner the cache does not hold (or holds with another UID)
// is read from the apiserver before it is called absent, and confirmed
// absent owners are remembered (as kube's absentOwnerCache). Deletes carry
// the dependent's UID and resourceVersion as preconditions, and reference
// removals are read-modify-write updates, so a change the cache has not
// seen yet makes the write fail and the key is retried. Each cache follows
// one resource and may lag the one whose event started a reconcile, so
// the collector waits until every cache holds what the log holds
// (WaitForLog) before it decides that an object has no dependents: before
// a dependent of a foreground deletion goes in the background for having
// none, before an owner deleted in the foreground loses its finalizer for
// having no blocking ones left, and before an owner deleted with orphan
// lists the dependents to let go. (Kube's collector, whose informers lag
// each other the same way, does not wait.)
//
// # Partial caches
//
// A scaled-out controller manager's pod cache follows only the pods whose
// controller is in the replica's partitions (consumer.Cache.Partial, see
// package manager). The collector then acts on a pod of such a cache on
// behalf of the replica that owns the pod's controller's key (Owns and
// Guard get that key), which is the one whose cache has it. Looking for
// every dependent of one owner (foreground deletion, orphaning, and the
// subtree check above) lists that resource through the apiserver instead
// of the cache, and an owner waiting for dependents that another replica
// follows looks again every second (their changes do not reach it).
//
// # Causation
//
// Every write is made with the reconcile's ctx through a client from
// consumer.WrapConfig, so the delete of a dependent carries the id of the
// event (typically the owner's delete) that queued it.
//
// # Not done
//
// Kube's cycle guard (making blocking references non-blocking when an owner
// and a dependent both wait for dependents) is left out; resources added
// after start (new CRDs) are not picked up until a restart.
package gc
