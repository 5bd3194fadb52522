package up

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/services/apiserver"
	"github.com/cairn-dev/cairn/services/controllers/nodeipam"
	"github.com/cairn-dev/cairn/services/kubelet"
	"github.com/cairn-dev/cairn/services/kubelet/node"
)

// KubeletKubeconfig is the kubeconfig (user system:node:<name>, group
// system:nodes) that `cairn up` writes for its own node. A node added with
// `cairn kubelet` gets one of its own (package join).
const KubeletKubeconfig = "kubelet.kubeconfig"

// ProxyKubeconfig is the kubeconfig (user system:kube-proxy) of the node's
// proxy, which runs in process with the kubelet.
const ProxyKubeconfig = "proxy.kubeconfig"

// nodeService runs one real node in process (kubelet.RunNode): a private
// containerd in a network namespace of its own and the kubelet on it.
type nodeService struct {
	cp   *controlPlaneService
	name string
	addr string
}

func (s *nodeService) Name() string { return "node" }

func (s *nodeService) Describe() string { return s.name + ", kubelet " + s.addr }

// NetNSName is the network namespace of the node of the cairn up whose data
// directory is root: one per data directory, so that several clusters can
// run on one machine.
func NetNSName(root string) string {
	sum := sha256.Sum256([]byte(root))
	return "cairn-" + hex.EncodeToString(sum[:4])
}

func (s *nodeService) Run(ctx context.Context, ready func()) error {
	rc, err := s.cp.clientConfig(apiserver.NodeUserPrefix+s.name, []string{apiserver.GroupNodes}, KubeletKubeconfig)
	if err != nil {
		return err
	}
	prc, err := s.cp.clientConfig(apiserver.UserKubeProxy, nil, ProxyKubeconfig)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("kubelet listen: %w", err)
	}
	defer ln.Close() // the kubelet closes it too; this covers a RunNode that fails first
	s.addr = "https://" + ln.Addr().String()
	err = kubelet.RunNode(ctx, kubelet.NodeConfig{RestConfig: rc, JS: s.cp.cp.JS, NodeName: s.name, Dir: s.cp.paths.Root,
		NetNS: NetNSName(s.cp.paths.Root), Listener: ln, NodeIP: "127.0.0.1", ClientCAs: s.cp.pki.CAPool, Ready: ready,
		Proxy:      &kubelet.ProxyConfig{RestConfig: prc, ClusterCIDR: nodeipam.DefaultClusterCIDR, Metrics: s.cp.cp.Metrics},
		ClusterDNS: dnsServers(s.cp.cfg), ClusterDomain: clusterDomain(s.cp.cfg), ResolvConf: s.cp.cfg.DNS.ResolvConf,
		CoreDNSBinary: coreDNSBinary(s.cp.log),
		Log:           s.cp.log.With("service", "node", "node", s.name)})
	if errors.Is(err, kubelet.ErrNotRoot) {
		return fmt.Errorf("%w: run as root, or with --node=false", err)
	}
	return err
}

// cleanNode stops whatever a node of this data directory left running
// (node.Clean): containerd, its shims and containers, mounts, the network
// namespace, and the tmpfs of its pods' in-memory volumes. Only root can
// have run a node; for others it does nothing.
func cleanNode(ctx context.Context, paths Paths, log *slog.Logger) error {
	if os.Geteuid() != 0 {
		return nil
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	cfg := node.Config{Dir: filepath.Join(paths.Root, "node"), NetNS: NetNSName(paths.Root), CreateNetNS: true}
	if err := node.Clean(cctx, cfg, log.With("service", "node")); err != nil {
		return fmt.Errorf("node clean-up: %w", err)
	}
	if err := kubelet.UnmountMemoryVolumes(KubeletDir(paths.Root)); err != nil {
		return fmt.Errorf("node clean-up: %w", err)
	}
	return nil
}

// nodeName is the name of cairn up's node: the host name, as a kubelet
// names its node, lowercased.
func nodeName() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "cairn-node"
	}
	return strings.ToLower(h)
}
