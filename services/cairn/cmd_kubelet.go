package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/services/cairn/up"
	"github.com/cairn-dev/cairn/services/kubelet"
)

// runKubelet runs a node agent as its own process: one real node on a
// private containerd (--runtime cri, root), or many hollow nodes for
// benchmarks (--runtime hollow --hollow-nodes N).
func runKubelet(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var (
		sf                           serviceFlags
		name, runtime, rootDir, addr string
		nodeIP, netns                string
		hollowNodes                  int
		hollowDelay                  time.Duration
	)
	host, _ := os.Hostname()
	fs := newFlagSet("kubelet", stderr)
	sf.register(fs, up.KubeletKubeconfig)
	fs.StringVar(&name, "node-name", strings.ToLower(host), "the node's name (hollow nodes: the prefix of their names)")
	fs.StringVar(&runtime, "runtime", "cri", "cri: real pods on a private containerd (needs root); hollow: simulated pods, for benchmarks")
	fs.IntVar(&hollowNodes, "hollow-nodes", 1, "how many hollow nodes to run (--runtime hollow)")
	fs.DurationVar(&hollowDelay, "hollow-start-delay", time.Second, "how long a hollow pod takes to start")
	fs.StringVar(&rootDir, "root-dir", "", "the node's state: containerd, pod volumes, logs (default <data-dir>/nodes/<node-name>)")
	fs.StringVar(&addr, "address", "127.0.0.1:10250", "address of the kubelet's HTTPS API (logs, exec)")
	fs.StringVar(&nodeIP, "node-ip", "127.0.0.1", "the node's InternalIP: where the apiserver reaches the kubelet")
	fs.StringVar(&netns, "netns", "", "network namespace of the node's pods (default cairn-<node-name>)")
	if help, err := parse(fs, args); help || err != nil {
		return err
	}
	if runtime != "cri" && runtime != "hollow" {
		return fmt.Errorf("--runtime %q: want cri or hollow", runtime)
	}
	log, err := newLogger(stderr, sf.logLevel)
	if err != nil {
		return err
	}
	rc, js, closeNATS, err := sf.connect("kubelet")
	if err != nil {
		return err
	}
	defer closeNATS()
	if runtime == "hollow" {
		fmt.Fprintf(stdout, "kubelet running %d hollow nodes (%s0..%s%d)\n", hollowNodes, name+"-", name+"-", hollowNodes-1)
		return kubelet.RunHollow(ctx, kubelet.HollowConfig{RestConfig: rc, JS: js, Nodes: hollowNodes, NamePrefix: name + "-",
			StartDelay: hollowDelay, Log: log})
	}
	if rootDir == "" {
		rootDir = filepath.Join(sf.dataDir, "nodes", name)
	}
	if netns == "" {
		netns = "cairn-" + name
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("kubelet listen: %w", err)
	}
	return kubelet.RunNode(ctx, kubelet.NodeConfig{RestConfig: rc, JS: js, NodeName: name, Dir: rootDir, NetNS: netns,
		Listener: ln, NodeIP: nodeIP, Log: log,
		Ready: func() { fmt.Fprintf(stdout, "kubelet running (node %s, https://%s)\n", name, ln.Addr()) }})
}
