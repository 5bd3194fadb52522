// Package nodelifecycle is the node lifecycle controller: it notices nodes
// whose kubelet stopped reporting, taints them, and evicts their pods, as
// kube-controller-manager's node-lifecycle and taint-eviction controllers
// do, so that a Deployment whose node dies gets its pods back elsewhere.
//
// # Heartbeats
//
// A kubelet renews its Lease in kube-node-lease every 10 s and reports the
// Node's conditions. The controller follows both (the Lease from the
// CAIRN_LEASES stream) and notes, on its own clock, when it last saw either
// change, as kube's probeTimestamp (so clock skew between machines does not
// matter). A node first seen by the controller starts with a full grace
// period. When a node has not been heard from for Config.GracePeriod (50 s
// by default, kube's --node-monitor-grace-period), its Ready,
// MemoryPressure, DiskPressure and PIDPressure conditions become Unknown
// (reason NodeStatusUnknown, "Kubelet stopped posting node status."),
// through nodes/status; the Event NodeNotReady is recorded on the node, and
// the Ready condition of its pods is set to False with a NodeNotReady
// Event on each, as kube's MarkPodsNotReady.
//
// # Taints
//
// A node whose Ready condition is Unknown gets the taints
// node.kubernetes.io/unreachable with effects NoSchedule and NoExecute; one
// whose Ready is False gets node.kubernetes.io/not-ready likewise. They go
// when the node is Ready again. The scheduler then keeps new pods off the
// node (NoSchedule).
//
// # Eviction
//
// A pod on a node with NoExecute taints is deleted at once unless it
// tolerates all of them; if it does, it is deleted when the shortest
// tolerationSeconds of its matching tolerations has passed since the
// controller saw the taint (never, without tolerationSeconds; a controller
// that restarts, or a node key that moves to another replica, starts the
// count again, as kube's taint eviction does). The apiserver gives every
// pod 300 s of toleration for both taints (admission plugin
// DefaultTolerationSeconds), so by default the pods of a dead node are
// deleted five minutes after it was marked unreachable, and their
// ReplicaSets replace them. Before the delete, the pod gets the condition
// DisruptionTarget (reason DeletionByTaintManager), and the Event
// TaintManagerEviction is recorded on it. A pod of a dead node keeps its
// deletionTimestamp until the kubelet confirms, as in Kubernetes; it no
// longer counts as a replica, so its replacement starts at once.
//
// The pods of a tainted node are listed from the apiserver (a field
// selector on spec.nodeName), not from a cache: only unhealthy nodes need
// them, and scaled-out controller-manager replicas follow only some pods.
//
// # Not done
//
// Kube's zone-aware eviction rate limits (--node-eviction-rate and the
// partial-disruption modes) are not ported: every unhealthy node is handled
// at once. Node startup grace (--node-startup-grace-period) is the same as
// the monitor grace period.
package nodelifecycle
