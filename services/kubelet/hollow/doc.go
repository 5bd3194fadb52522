// Package hollow is a container runtime that runs nothing, for hollow
// nodes (as kubemark's fake runtime and KWOK): sandboxes get an address from
// the node's pod CIDR after a configurable delay, containers "run" as soon as
// they are started and until they are stopped, exec probes succeed. It holds
// a few map entries per pod, so one process can host thousands of nodes.
//
// It implements container.Runtime and reports Info.Simulated, which the
// kubelet turns into the node label cairn.dev/hollow=true. It is never the
// default: benchmarks choose it explicitly.
package hollow
