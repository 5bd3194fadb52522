// Package csiclient dials a CSI driver's unix socket and asks it the
// questions every CSI caller starts with: is it ready (Probe), what is its
// name, which capabilities do its services have.
//
// The kubelet (NodeStage/Publish), the provisioner and the attacher (the
// controller service) share it. A Client is safe for concurrent use; its
// connection is made lazily by gRPC and re-made after the driver restarts,
// so one Client lives as long as its caller.
package csiclient
