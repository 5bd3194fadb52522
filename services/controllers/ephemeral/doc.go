// Package ephemeral is the ephemeral volume controller, a port of kube's
// pkg/controller/volume/ephemeral: for every volume of a pod with
// ephemeral.volumeClaimTemplate it creates the PersistentVolumeClaim
// POD-VOLUME from the template (labels, annotations, spec), controlled by
// the pod (blockOwnerDeletion), so the garbage collector deletes it with
// the pod. A claim of that name the pod does not control is not touched:
// the pod's volume is refused (an error, retried, and a Warning Event on
// the pod), as kube's ephemeral.VolumeIsForPod. Pods being deleted are
// left alone; a claim deleted while its pod lives is made again.
//
// Keys are pods. With a sharded manager the pod cache holds the pods whose
// controller is in this replica's partitions (plus those without one), so
// a pod is handled by the replica that owns its controller's key, or its
// own key when it has no controller.
package ephemeral
