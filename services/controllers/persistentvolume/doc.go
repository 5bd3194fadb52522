// Package persistentvolume is kube-controller-manager's PersistentVolume
// controller (pkg/controller/volume/persistentvolume): it binds
// PersistentVolumeClaims to PersistentVolumes, hands claims to their
// class's provisioner, and tracks the phases of both. Binding rules live
// in package binding, shared with the scheduler.
//
// # Claims (syncClaim)
//
// A claim whose binding never completed (no pv.kubernetes.io/bind-completed):
//
//   - without spec.volumeName: the best static volume is bound to it
//     (binding.FindBestMatch). With none: a WaitForFirstConsumer class and
//     no volume.kubernetes.io/selected-node yet gives the Normal Event
//     WaitForFirstConsumer "waiting for first consumer to be created
//     before binding"; a class names its provisioner on the claim
//     (volume.kubernetes.io/storage-provisioner and the beta annotation)
//     with Normal ExternalProvisioning "Waiting for a volume to be created
//     either by the external provisioner '...' or manually by the system
//     administrator. ..." (a missing class, or an in-tree kubernetes.io/
//     provisioner, is Warning ProvisioningFailed); no class at all is
//     Normal FailedBinding "no persistent volumes available for this claim
//     and no storage class is set". The claim stays Pending.
//   - with spec.volumeName (pre-bound by the user): bound to that volume if
//     it is free and satisfies the claim (else Warning VolumeMismatch), or
//     if the volume is already bound to it; Pending while the volume is
//     missing or held by another claim.
//
// A bound claim whose volume is gone, or lost its reference, or is bound
// to another claim, is Lost (Warning ClaimLost / ClaimMisbound).
//
// Binding writes, each only if needed: the volume's claimRef (with
// pv.kubernetes.io/bound-by-controller when the controller chose it), the
// volume's phase Bound, the claim's spec.volumeName and annotations
// (bound-by-controller, bind-completed), the claim's phase Bound with the
// volume's access modes and capacity.
//
// # Volumes (syncVolume)
//
// No claimRef, or one without UID (pre-bound by name): Available. A claim
// that is gone (or re-created with another UID): Released, then the
// reclaim policy: Retain keeps it Released; Delete of a volume a CSI
// driver provisioned (pv.kubernetes.io/provisioned-by) is the
// provisioner's (package csiprovisioner); Delete without a provisioner and
// Recycle fail the volume (Warning VolumeFailedDelete / VolumeFailedRecycle).
// A claim bound to this volume: Bound. A claim bound elsewhere: a volume
// the controller bound is unbound (Available again), a provisioned one
// with Delete policy is released.
//
// # Caches and writes
//
// Claims and volumes have a queue each (sharded by key as every
// controller's). Unbound claims are synced again every 15 s (kube's
// --pvclaimbinder-sync-period) and whenever a volume becomes free or a
// class appears. The objects the controller wrote are kept until its
// caches show them (overlay), as kube's controller updates its caches with
// its own writes; writes are updates with the read resourceVersion, so a
// conflict (another replica, the user) retries on fresh state.
package persistentvolume
