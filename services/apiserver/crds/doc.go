// Package crds runs, in every apiserver, what kube-apiextensions-apiserver
// runs for CustomResourceDefinitions:
//
//   - the follower: it lists the definitions from etcd and follows them on
//     the log (the watch hub), and makes the registry serve the kinds of
//     every Established definition (schemas/custom builds them). Every
//     apiserver follows the same log, so all serve the same set. Sync
//     waits until the registry reflects every definition committed
//     before the call, so that a request for a kind defined a moment ago
//     finds it on any apiserver;
//   - the naming controller: it accepts a definition's names unless
//     another definition of the group has them (status.acceptedNames and
//     the NamesAccepted condition, as kube's NamingConditionController),
//     and the establishing controller: Established once the names are
//     accepted, unless the conversion webhook's caBundle is invalid
//     (Established False, reason InvalidCABundle; requests for its kinds
//     then fail as kube's do, see Unservable);
//   - the finalizer: a deleted definition (which the apiserver marks
//     Terminating with the customresourcecleanup.apiextensions.k8s.io
//     finalizer) has its objects deleted, and then its finalizer removed.
//
// The controllers write through the apiserver's loopback transport as
// system:apiserver, so their writes are on the log with an actor like any
// other. Every apiserver runs them, as kube does: their writes are
// idempotent, and a conflict between two replicas is retried.
package crds
