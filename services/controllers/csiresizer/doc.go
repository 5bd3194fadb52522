// Package csiresizer is the controller side of kubernetes-csi's
// external-resizer, for the drivers the controller-manager has an
// endpoint for (--csi-endpoint, package csiconn).
//
// A Bound claim whose spec.resources.requests.storage exceeds its
// status.capacity, on a CSI volume of one of these drivers, is expanded
// when the driver offers EXPAND_VOLUME (the PersistentVolumeClaimResize
// admission plugin has already checked the class's allowVolumeExpansion):
// the claim gets condition Resizing, status.allocatedResources the new size
// and allocatedResourceStatuses storage=ControllerResizeInProgress (Normal
// Event Resizing "External resizer is resizing volume pvc-..."), then
// ControllerExpandVolume (required bytes the request, the volume's
// capability). On success the PV's spec.capacity becomes the new size;
// when the driver needs node expansion the claim gets condition
// FileSystemResizePending and storage=NodeResizePending (Normal
// FileSystemResizeRequired) and the kubelet finishes; otherwise the
// claim's status.capacity becomes the new size, its resize conditions and
// status go (Normal VolumeResizeSuccessful "Resize volume succeeded"). A
// failure is Warning VolumeResizeFailed, storage=ControllerResizeInfeasible
// for InvalidArgument/OutOfRange answers (else ControllerResizeInProgress
// stays), retried with backoff.
package csiresizer
