// Package volumeadmission holds kube-apiserver's storage admission plugins
// (plugin/pkg/admission/storage), on a cache of StorageClasses:
//
//   - DefaultStorageClass gives a new PersistentVolumeClaim that names no
//     class (no spec.storageClassName, not even "", and no beta
//     annotation) the default StorageClass: the one annotated
//     storageclass.kubernetes.io/is-default-class=true (or the beta
//     annotation), the newest when several are, by name when they were
//     created at the same time.
//   - StorageObjectInUseProtection adds the finalizer
//     kubernetes.io/pvc-protection to every new claim and
//     kubernetes.io/pv-protection to every new PersistentVolume; the
//     pvcprotection and pvprotection controllers remove them.
//   - PersistentVolumeClaimResize refuses (403) to grow a claim that is
//     not bound, or whose StorageClass does not set allowVolumeExpansion.
//
// kube runs the resize check as validating admission, after the claim's
// own validation; cairn's admission runs before validation, so the plugin
// lets an update that is invalid anyway through to validation, and kube's
// answer (422) comes out.
//
// Classes follows StorageClasses from a snapshot of etcd and then the log
// (objcache), so admission reads no etcd on the request path; like kube's
// informer-backed plugins it can lag the log by a few milliseconds.
package volumeadmission
