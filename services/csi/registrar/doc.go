// Package registrar is both ends of the kubelet's plugin registration for
// CSI drivers (kube's pluginwatcher and node-driver-registrar):
//
//   - Serve is the node-driver-registrar's part, next to a driver: it serves
//     the kubelet's Registration service (k8s.io/kubelet's pluginregistration
//     v1) on <dir>/<driver>-reg.sock, whose GetInfo names the driver
//     (type CSIPlugin), the path of its CSI socket and the CSI versions it
//     speaks, and whose NotifyRegistrationStatus hears the kubelet's answer.
//   - Info is the kubelet's call on such a socket: it asks GetInfo and
//     validates the answer.
//
// The registration directory is the kubelet's plugins_registry (kube's
// /var/lib/kubelet/plugins_registry); sockets whose names start with "."
// are not plugins, as in kube.
package registrar
