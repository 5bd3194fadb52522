// Package fit is the one rule for whether a pod fits a node, shared by the
// scheduler's NodeResourcesFit filter and the apiserver's check of
// pods/binding, so that the two can never disagree. It is kube's rule:
// k8s.io/component-helpers/resource.PodRequests for what a pod asks and
// kube-scheduler's noderesources.Fits for whether a node can give it. It
// imports only API types, so any consumer may link it.
//
// # Requests
//
// PodRequests is what a pod asks of a node, in the resources cairn
// accounts (cpu, memory, ephemeral storage):
//
//   - the sum of its app containers' requests and of its restartable
//     (sidecar) init containers', which run alongside them;
//   - raised, per resource, to the largest one-off init container plus
//     the sidecars started before it (init containers run one at a time);
//   - replaced, for cpu and memory, by the pod-level requests
//     (spec.resources.requests) when the pod sets them;
//   - plus spec.overhead.
//
// Options.NonMissing counts a container's missing cpu or memory request
// as a default, as the scheduler's scoring does so that request-less pods
// still spread.
//
// # Fitting
//
// A node offers its Allocatable (Node.status.allocatable). A resource the
// node does not list is one it has none of: a node whose allocatable has
// no "pods" takes no pod at all, and every pod is refused with "Too many
// pods", exactly as kube-scheduler's NodeInfo counts it (AllowedPodNumber
// 0). Check and Fits compare a request with what the node has left after
// the pods already counted on it; a resource the pod does not request is
// never insufficient, whatever the node's state. The reasons are kube's
// words: "Too many pods", "Insufficient cpu", "Insufficient memory",
// "Insufficient ephemeral-storage".
//
// Resources other than these (extended resources, huge pages) are not
// accounted: a pod requesting them fits as if it did not.
//
// # Refused bindings
//
// The apiserver refuses a binding that does not fit with 409 Conflict
// whose details carry one StatusCause of type CauseOvercommitted per
// insufficient resource (Overcommitted builds it). A scheduler tells this
// refusal (its view of the node was stale: requeue the pod) from other
// conflicts (the pod is bound or gone: drop it) with IsOvercommitted,
// never by matching the message.
//
// All functions are pure and safe for concurrent use.
package fit
