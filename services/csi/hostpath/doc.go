// Package hostpath is cairn's CSI driver hostpath.csi.cairn.dev: a port of
// the behaviour of kubernetes-csi/csi-driver-host-path, where every volume
// is a directory under the driver's state directory on the node that runs
// it.
//
// # Services
//
// One gRPC server on a unix socket serves the three CSI services:
//
//   - Identity: plugin info, capabilities (controller service, topology,
//     online expansion), Probe.
//   - Controller: CreateVolume / DeleteVolume (a directory per volume, with
//     capacity accounting against --capacity, from a snapshot or a clone),
//     ControllerPublish / Unpublish (attach bookkeeping; only this node
//     exists), ValidateVolumeCapabilities, ListVolumes (paged, with
//     published nodes), ControllerGetVolume, GetCapacity,
//     ControllerExpandVolume, and snapshots (a tar of the directory).
//   - Node: NodeStage / Unstage (bind mount of the directory at the staging
//     path), NodePublish / Unpublish (bind mount at the target path, read-only
//     when asked; the driver creates and removes the target), NodeGetInfo,
//     NodeGetVolumeStats, NodeExpandVolume (ControllerExpandVolume grows
//     the reservation and requires node expansion: the volume presents its
//     old size, NodeGetVolumeStats' total, until NodeExpandVolume at a path
//     where it is published or staged). Inline ephemeral volumes
//     (volume_context csi.storage.k8s.io/ephemeral=true, which the kubelet
//     sends when the CSIDriver has podInfoOnMount) are created on
//     NodePublish and deleted on NodeUnpublish, as the upstream driver does.
//
// # Topology
//
// A volume lives on the node that created it: its accessible_topology is
// {topology.hostpath.csi.cairn.dev/node: nodeID}, and CreateVolume refuses
// (ResourceExhausted) requirements that do not include this node.
//
// # State
//
// Volumes, attachments, stagings, publications and snapshots are kept in
// state.json in the state directory, rewritten atomically after each
// change, so a restarted driver keeps its volumes and knows its mounts.
// Every RPC holds one mutex: calls are serialised, which the spec allows
// and which makes idempotency simple.
package hostpath
