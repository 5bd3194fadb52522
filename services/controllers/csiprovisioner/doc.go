// Package csiprovisioner is the controller side of kubernetes-csi's
// external-provisioner, for every CSI driver the controller-manager has an
// endpoint for (--csi-endpoint NAME=unix:///path, package csiconn: the
// stand-in for the provisioner sidecar next to each driver).
//
// # Provisioning
//
// A claim is provisioned when it has no volume, the PV controller named
// one of these drivers as its provisioner
// (volume.kubernetes.io/storage-provisioner), its class names that driver
// and, for WaitForFirstConsumer, the scheduler chose a node
// (volume.kubernetes.io/selected-node), and no volume pvc-<claim uid>
// exists yet. CreateVolume is called with name pvc-<claim uid>, the
// claim's request (and limit) as capacity range, one volume capability per
// access mode (mount with the class's csi.storage.k8s.io/fstype and mount
// options, or block), the class's parameters without the
// csi.storage.k8s.io/ ones, and, for drivers with
// VOLUME_ACCESSIBILITY_CONSTRAINTS, accessibility requirements: the
// selected node's topology (its labels for the topology keys its CSINode
// registers for the driver), else the class's allowedTopologies, else the
// topologies of every node whose CSINode registers the driver. The PV made
// of the answer carries spec.csi (driver, volumeHandle, volumeAttributes,
// fsType), node affinity from accessible_topology, the claimRef, the
// class's reclaim policy and name, pv.kubernetes.io/provisioned-by, and,
// with reclaim policy Delete, the finalizer
// external-provisioner.volume.kubernetes.io/finalizer. The PV controller
// then completes the binding.
//
// Events, on the claim, as external-provisioner's: Normal Provisioning
// "External provisioner is provisioning volume for claim \"ns/name\"",
// Normal ProvisioningSucceeded "Successfully provisioned volume pvc-...",
// Warning ProvisioningFailed "failed to provision volume with
// StorageClass \"...\": ...". A ResourceExhausted answer for a selected
// node drops the node annotation so the scheduler chooses again.
//
// # Deletion
//
// A Released volume of one of these drivers that it provisioned, with
// reclaim policy Delete: DeleteVolume (Warning VolumeFailedDelete on the
// PV when it fails, retried), then the PV object is deleted and the
// finalizer removed. A volume changed to Retain loses the finalizer.
package csiprovisioner
