// Package binding holds the rules by which a PersistentVolumeClaim and a
// PersistentVolume are matched and bound, shared by the PersistentVolume
// controller and the scheduler's VolumeBinding plugin, as kube shares
// k8s.io/component-helpers/storage/volume between them. Everything here
// is a pure function of the objects it is given.
//
// # Matching
//
// FindBestMatch is the PV controller's index.go findBestMatchForClaim: the
// volumes are grouped by their access modes, and the groups that hold
// every mode the claim asks for are tried from the fewest modes up; in each
// group FindMatchingVolume picks
//
//   - a volume pre-bound to the claim (spec.claimRef names it, and its UID
//     if set), whatever its phase, class or labels;
//   - otherwise the smallest Available volume whose capacity covers the
//     request, whose volumeMode (Filesystem when unset) is the claim's,
//     whose labels match the claim's selector, whose class is the claim's
//     (both empty counts) and, in the scheduler's path (a node given),
//     whose nodeAffinity admits the node and whose access modes hold the
//     claim's.
//
// Volumes being deleted, volumes bound or pre-bound to another claim and,
// in the controller's path with delayed binding (WaitForFirstConsumer),
// every volume not pre-bound are skipped.
package binding
