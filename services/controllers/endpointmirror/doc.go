// Package endpointmirror is the EndpointSlice mirroring controller of the
// controller manager, a port of kube's
// pkg/controller/endpointslicemirroring. For a Service without a selector
// someone else writes the core/v1 Endpoints (an operator pointing a
// Service at addresses outside the cluster); this controller mirrors
// those Endpoints into discovery.k8s.io/v1 EndpointSlices, so that the
// node proxies and cluster DNS, which read only slices, see them too.
//
// Mirrored slices carry the Endpoints' labels and annotations (but the
// last-change trigger time and kubectl's last-applied configuration),
// kubernetes.io/service-name: <name> and
// endpointslice.kubernetes.io/managed-by:
// endpointslicemirroring-controller.k8s.io, and a controller owner
// reference to the Endpoints. As in kube:
//
//   - Each subset of the Endpoints and address family is one slice (its
//     ports, its addresses; notReadyAddresses with ready=false); subsets
//     with the same ports share it. At most MaxEndpointsPerSubset
//     addresses (1000, kube's --mirroring-max-endpoints-per-subset) of a
//     subset are mirrored; the rest, and addresses that are not IPs, are
//     skipped with a Warning Event on the Endpoints (TooManyAddressesToMirror,
//     InvalidIPAddress).
//   - Nothing is mirrored, and slices mirrored before are deleted, when
//     the Endpoints carry endpointslice.kubernetes.io/skip-mirror: "true"
//     (the apiserver's default/kubernetes does) or a leader-election
//     annotation, when there is no Service of that name, or when the
//     Service has a selector (the EndpointSlice controller's then).
//   - A slice is rewritten only when its endpoints differ, a slice no
//     longer needed is reused for a new one of the same address family,
//     and a change made to a mirrored slice by anyone else is undone.
//
// The controller reconciles Endpoints keys ("namespace/name", the
// Service's key too), so a sharded replica mirrors the Endpoints its
// partitions hold, as the other controllers of the manager.
package endpointmirror
