// Package pvprotection is the PV protection controller, a port of kube's
// pkg/controller/volume/pvprotection. The StorageObjectInUseProtection
// admission plugin gives every new PersistentVolume the finalizer
// kubernetes.io/pv-protection; this controller adds it to volumes that
// lack it and, once a volume is being deleted, removes it when the volume
// is not Bound (status.phase), so that a bound volume stays Terminating
// until its claim lets it go. PersistentVolumes are cluster-scoped; their
// names are keys of the controller-manager's shard.
package pvprotection
