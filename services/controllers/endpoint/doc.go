// Package endpoint holds the two endpoint controllers of the controller
// manager, each keeping, for every Service with a selector (not
// ExternalName, not default/kubernetes, whose endpoints the apiserver's
// reconciler writes), what kube's controllers of the same name keep:
//
//   - SliceController (NewSlices): discovery.k8s.io/v1 EndpointSlices,
//     labelled kubernetes.io/service-name and
//     endpointslice.kubernetes.io/managed-by:
//     endpointslice-controller.k8s.io, owned by the Service (the garbage
//     collector removes them with it), at most MaxEndpointsPerSlice (100)
//     endpoints each. The work is k8s.io/endpointslice's Reconciler,
//     kube's own: endpoints with ready/serving/terminating conditions,
//     named target ports resolved per pod (a pod without the port goes in
//     the slices of the port set it has), nodeName, zone, hostname, and
//     updates that touch only the slices that change.
//   - EndpointsController (NewEndpoints): core/v1 Endpoints, as kube's
//     endpoint controller builds them (addresses and notReadyAddresses,
//     repacked; the last-change-trigger-time and over-capacity
//     annotations beyond MaxEndpointsCapacity), for kubectl get endpoints
//     and describe svc.
//
// Both reconcile Service keys, so a sharded replica handles the Services
// its partitions hold. The pods of a Service can be anyone's, so neither
// can use the pod cache partitioned by the pods' controller: a sharded
// replica follows the pods of the namespaces where it reconciles a
// Service (see podSource), an unsharded one shares the process's pod
// cache.
//
// Writes and Events carry the cause of the reconcile: the Reconciler of
// k8s.io/endpointslice writes with context.TODO(), so it is given, per
// reconcile, a client and a recorder bound to the reconcile's ctx.
package endpoint
