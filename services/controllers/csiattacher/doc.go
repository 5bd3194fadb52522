// Package csiattacher attaches CSI volumes to the nodes whose pods use
// them, as two Kubernetes components do together:
//
// # The attach/detach controller (kube-controller-manager)
//
// Its CSI part (pkg/controller/volume/attachdetach with the csi plugin's
// attacher): for every node, the volumes its pods need are those of the
// pods bound to it that have not finished (Succeeded or Failed), through
// their PersistentVolumeClaims (and ephemeral volumes, claims named
// <pod>-<volume>) bound to PersistentVolumes with spec.csi whose
// CSIDriver requires attachment (spec.attachRequired, true when the
// CSIDriver does not exist, as kube's csi plugin). Each needs a
// VolumeAttachment named csi-<sha256(volumeHandle+driver+node)> with
// spec.attacher the driver, spec.nodeName and spec.source
// .persistentVolumeName; those of the node that no pod needs any more are
// deleted once the node no longer reports the volume in
// status.volumesInUse (the kubelet unmounted it), or at once when the node
// is gone. The node's status.volumesAttached lists the attached ones
// (kubernetes.io/csi/<driver>^<volumeHandle>), which the kubelet waits for
// before mounting. It runs whatever drivers the controller-manager can
// reach.
//
// # external-attacher (the CSI sidecar)
//
// For the drivers with an endpoint (--csi-endpoint, package csiconn): a
// VolumeAttachment of the driver not yet attached gets the finalizer
// external-attacher/<driver with every character but letters, digits and
// '-' turned into '-'>, its PersistentVolume the same finalizer, then
// ControllerPublishVolume (the PV's volume handle, the node id from the
// node's CSINode, one volume capability from the PV's access modes, mount
// flags and fsType, readonly and volume attributes of spec.csi);
// success sets status.attached and status.attachmentMetadata (the
// publish context), failure status.attachError, retried with backoff. A
// driver without PUBLISH_UNPUBLISH_VOLUME is attached at once without a
// call (external-attacher's trivial handler). A VolumeAttachment being
// deleted is ControllerUnpublishVolume'd (failure: status.detachError),
// then status.attached false and the finalizer removed. A
// PersistentVolume loses the finalizer when no VolumeAttachment of the
// driver refers to it.
package csiattacher
