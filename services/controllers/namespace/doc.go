// Package namespace is the namespace controller: it empties a namespace
// that is being deleted and then lets the apiserver remove it, as
// kube-controller-manager's namespace controller does.
//
// Deleting a namespace does not remove it: the apiserver sets its
// deletionTimestamp and phase Terminating, and spec.finalizers
// ["kubernetes"] keeps it. The controller then, for every namespaced
// resource discovery lists (list and delete verbs), deletes the whole
// collection in the namespace (propagationPolicy Background, so the garbage
// collector handles dependents) and lists it again to see what is left.
// While objects remain (pods waiting for their kubelet, objects held by
// finalizers), the namespace is reconciled again with a growing delay.
// When nothing is left, the controller removes "kubernetes" from
// spec.finalizers with PUT namespaces/<name>/finalize; with no finalizer
// left the apiserver deletes the namespace.
//
// The namespace's status carries kube's deletion conditions
// (NamespaceDeletionDiscoveryFailure, NamespaceDeletionGroupVersionParsingFailure,
// NamespaceDeletionContentFailure, NamespaceContentRemaining,
// NamespaceFinalizersRemaining), updated only when they change.
//
// Reads of the namespace and of the content are live (not cached): the
// finalize must not be decided on a stale view. Writes carry the cause of
// the namespace event being reacted to (consumer.WrapConfig).
package namespace
