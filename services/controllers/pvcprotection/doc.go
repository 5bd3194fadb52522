// Package pvcprotection is the PVC protection controller, a port of kube's
// pkg/controller/volume/pvcprotection. The StorageObjectInUseProtection
// admission plugin gives every new PersistentVolumeClaim the finalizer
// kubernetes.io/pvc-protection; this controller adds it to claims that
// lack it and, once a claim is being deleted, removes it when no pod uses
// the claim, so that a claim in use stays Terminating until its pods go.
//
// A pod uses a claim, as in kube, when it is scheduled (spec.nodeName set)
// and one of its volumes names the claim (persistentVolumeClaim.claimName),
// or is a generic ephemeral volume whose claim (POD-VOLUME) the pod
// controls, unless the pod is shut down (deleted with a zero grace
// period). A pod that ran to completion still uses its claims until it is
// deleted, as in kube.
//
// The pod cache (shared, Partitioned) is asked first; when it shows no
// user, a live list of the namespace's pods decides (kube's askAPIServer),
// so a pod the cache has not seen yet keeps the claim. Pod changes queue
// the claims the pod names. With a sharded manager the pod cache holds
// only this replica's partitions, so the pod that releases a claim may be
// seen by another replica: a claim kept in use is then looked at again
// every RecheckInUse.
package pvcprotection
