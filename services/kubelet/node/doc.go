// Package node runs the container runtime of one cairn node: a private
// containerd (Debian's 1.6, with crun or runc and the CNI plugins) that the
// kubelet drives through the CRI.
//
// # What Start sets up
//
// Everything lives under Config.Dir: containerd.toml, root/, state/, the
// gRPC socket containerd.sock (under /run/cairn-node/<hash>/ when Dir is
// too long for a unix socket path), the OCI runtime's state (runc/), the CNI conflist
// (cni/net.d/10-cairn.conflist: bridge "cairn0" with host-local IPAM over
// Config.PodCIDR, data in cni/ipam/, and portmap), registry hosts
// (certs.d/<host>/hosts.toml) and containerd.log. The CRI plugin uses the
// pause image of package ops/images as sandbox image, cgroupfs, the
// overlayfs snapshotter (native when overlay does not mount under Dir) and
// keeps pod network namespaces under state/ as well. It clamps
// oom_score_adj to containerd's own (restrict_oom_score_adj): without
// CAP_SYS_RESOURCE, as on these machines, runc cannot lower it and every
// sandbox would fail to start.
//
// # Start-up cost
//
// Thirty pods starting at once on two cores are bound by CPU, so the
// defaults are the cheapest correct ones. Containers are created by crun
// when it is installed and the cgroup layout suits it (Config.OCIRuntime;
// runc otherwise): runc, a Go binary, is executed twice per container and
// re-executes itself as the container's init, which made it the largest
// single cost of a pod. state/ and runc/ are each a tmpfs
// (Config.StateOnDisk keeps them on disk), as containerd's /run/containerd
// is: every pod creates and deletes dozens of bundle files, fifos and
// namespace pins there. BenchmarkPodStart30 measures the default against
// runc and against runc with state on disk in one run, with each stage's
// latency and the node's own CPU per pod.
//
// # Network namespaces
//
// containerd runs inside Config.NetNS, so the bridge, the veths and every pod
// IP exist only in that namespace; nothing is configured in the host
// namespace. The host side reaches pods with [Runtime.DialContext] (and
// listens there with [Runtime.Listen]), which open their sockets on a thread
// switched into the namespace. The CRI streaming server (exec, attach,
// port-forward URLs) listens on the namespace's 127.0.0.1, so fetch those
// URLs through DialContext too.
//
// # Lifetime
//
// [Start] returns once the CRI reports RuntimeReady and NetworkReady and the
// images are imported. [Runtime.Stop] removes all pods and kills exactly the
// containerd it started (by pid), then any shim or container left from it,
// unmounts everything under Dir, removes the node's cgroups
// ([Runtime.CgroupParent]) and deletes the namespace if Start created it.
// [Runtime.Run] fits a Run(ctx) supervisor: it stops the node when ctx ends
// and returns an error when containerd dies on its own. A containerd left
// running by a crashed owner (SIGKILLed) is adopted by the next Start with
// the same Dir, found by its command line even if the pid file was lost;
// an owner that stops before it starts the node again calls [Clean], which
// stops what was left as Stop would.
//
// Package nodetest wraps all of this for tests: nodetest.Start(t).
package node
