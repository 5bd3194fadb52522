// Package csiconn is how the controller-manager reaches CSI drivers'
// controller services: a set of endpoints by driver name (the
// `--csi-endpoint NAME=unix:///path` flag, the stand-in for
// external-provisioner's and external-attacher's sidecar deployment next
// to each driver), dialled lazily over a unix socket, with the driver's
// identity and capabilities probed once per connection.
//
// It is the minimal dial code the provisioner and attacher need while the
// shared CSI client package (services/csi/csiclient) is not on main; it
// goes when that lands.
package csiconn
