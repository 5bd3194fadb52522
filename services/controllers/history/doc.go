// Package history keeps the revision history of a controller that records
// its pod templates in apps/v1 ControllerRevisions (DaemonSets,
// StatefulSets). It is kube's pkg/controller/history, shaped for the
// consumer runtime: revisions are listed from a shared consumer.Cache and
// written through the apiserver with the caller's ctx, so every write
// carries the cause of the round that made it.
//
// # Revisions
//
// A revision is named PARENT-HASH (ControllerRevisionName), where HASH is
// the FNV-32 hash of its Data (HashControllerRevision), rendered with
// rand.SafeEncodeString, and also put in the label
// controller.kubernetes.io/hash. Two revisions are equal (EqualRevision)
// when their hashes agree and their Data is the same bytes. Revision
// numbers grow: the next one is one more than the highest
// (NextRevision); a rollback to an old template renumbers the old
// revision rather than creating a new one.
//
// # Collisions
//
// Create retries a name taken by a revision with other Data with the
// parent's collisionCount added to the hash, and raises the count each
// time, as kube's realHistory does; the caller persists the count in its
// status (status.collisionCount), so the next revision of the same Data
// gets the same name. A name taken by a revision with the same Data is
// that revision: Create returns it.
//
// # Ownership
//
// List returns the revisions in the parent's namespace that match its
// selector and that it controls or nobody controls. Adopt adds the parent
// as controller of an orphan (the patch names the revision's UID, so a
// revision replaced under the same name is not adopted), Release removes
// it; both are strategic merge patches as kube's.
package history
