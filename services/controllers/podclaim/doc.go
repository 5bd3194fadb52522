// Package podclaim is how a controller takes and lets go of pods through
// their controller ownerReference: kube's PodControllerRefManager
// (pkg/controller/controller_ref_manager.go), shared by the controllers
// that own pods directly (ReplicaSets, StatefulSets, DaemonSets).
//
// A controller claims, among candidate pods (its own, by the owner index,
// and the orphans of its namespace, by OrphanIndex), those that match its
// selector (and filter): its own stay, orphans are adopted (a patch adds
// it as controller), and its own that stopped matching are released (a
// patch removes its reference). A controller being deleted neither adopts
// nor releases. Before its first adoption it asks CanAdopt, a live read
// proving it still exists and is not being deleted (kube's
// RecheckDeletionTimestamp). Both patches name the pod's UID, so a pod
// replaced under the same name is left alone.
package podclaim
