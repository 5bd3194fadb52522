// Package cri is the kubelet's real container runtime: container.Runtime
// over the CRI gRPC API (k8s.io/cri-api runtime/v1), as served by
// containerd's CRI plugin.
//
// Every sandbox and container it creates carries the labels of its pod
// (container.LabelPodUID, LabelPodName, LabelPodNamespace,
// LabelContainerName) and container.LabelManagedBy, and the CRI metadata
// attempt: that is all a restarted kubelet needs to adopt them. Listing
// filters on LabelManagedBy, so nothing else in the runtime is touched.
//
// Pod sandboxes get the pod's own network namespace (CRI NamespaceMode POD,
// the runtime's CNI gives it an IP), the kubelet's log directory, host port
// mappings and, when Config.CgroupParent is set, the cgroup
// <CgroupParent>/pod<uid>. Containers get command, args, env, working
// directory, bind mounts, a log file in the sandbox's log directory (the
// CRI log format, see package crilog) and cgroup limits (cpu shares, CFS
// quota, memory limit).
//
// gRPC NotFound errors become container.ErrNotFound; failed pulls wrap
// container.ErrImagePull.
package cri
