package up

// embeddedNodeNetNS is how cairn up's apiserver reaches admission webhooks
// given as a service reference: their endpoints are pods, whose addresses
// exist only inside the network namespace of the node they run on. The
// embedded node runs in this process with the namespace NetNSName(root),
// so the apiserver dials a pod of that node from inside that namespace
// (package netns). Pods of other nodes (joined with `cairn kubelet`) are
// in namespaces of other processes or machines the apiserver cannot
// enter: a webhook served only there cannot be called, and its
// failurePolicy decides (never is such an address sent out through the
// host's default route).
func embeddedNodeNetNS(cfg Config, paths Paths) func(string) (string, bool) {
	if !cfg.Node {
		return nil
	}
	name := cfg.NodeName
	if name == "" {
		name = nodeName()
	}
	path := netnsPath(NetNSName(paths.Root))
	return func(node string) (string, bool) { return path, node == name }
}

func netnsPath(name string) string { return "/run/netns/" + name }
