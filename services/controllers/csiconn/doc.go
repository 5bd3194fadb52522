// Package csiconn is how the controller-manager reaches CSI drivers'
// controller services: a set of endpoints by driver name (the
// `--csi-endpoint NAME=unix:///path` flag, the stand-in for
// external-provisioner's and external-attacher's sidecar deployment next
// to each driver), dialled lazily over a unix socket, with the driver's
// identity and capabilities probed once per connection.
//
// The dialling and probing are the shared CSI client's
// (services/csi/csiclient); this package adds the endpoints by driver name,
// one connection per driver, and the capabilities the provisioner and
// attacher need, probed once.
package csiconn
