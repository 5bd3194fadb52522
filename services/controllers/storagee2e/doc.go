// Package storagee2e holds the end-to-end tests of storage: the
// controller-manager's PV controller, CSI provisioner and attacher and the
// scheduler's VolumeBinding plugin, on a real control plane, against the
// real CSI driver hostpath.csi.cairn.dev serving a unix socket.
package storagee2e
