// Package container is the kubelet's boundary with a container runtime: the
// Runtime interface the pod workers drive, and the plain types it speaks in
// (sandboxes, containers, their configuration and status).
//
// It sits at the level of CRI (a sandbox per pod, containers in it, images
// pulled on demand) but in the kubelet's own types, so that two quite
// different runtimes fit behind it:
//
//   - services/kubelet/cri talks to containerd's CRI service over gRPC:
//     real network namespaces, images, processes and log files;
//   - services/kubelet/hollow keeps everything in memory, like kubemark's
//     fake runtime or KWOK: pods "run" after a configurable delay, at the
//     cost of a few map entries, so one process can host thousands of nodes.
//
// # Identity and restart safety
//
// The runtime is the kubelet's memory. Every sandbox and container carries
// the labels of the pod it belongs to (LabelPodUID, LabelPodName,
// LabelPodNamespace, LabelContainerName, the same keys the real kubelet
// uses) and an attempt number. A kubelet that restarts lists what the runtime
// holds and adopts it: it never has to remember anything itself.
//
// # Errors
//
// Methods return ErrNotFound (wrapped) for an id the runtime does not know;
// callers treat it as "already gone". Image pulls fail with an error that
// wraps ErrImagePull; a policy of Never with no image wraps
// ErrImageNeverPull.
package container
