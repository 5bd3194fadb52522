package up

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/cairn-dev/cairn/events/consumer"
	"github.com/cairn-dev/cairn/services/apiserver"
	"github.com/cairn-dev/cairn/services/kubelet"
	"github.com/cairn-dev/cairn/services/kubelet/cri"
	"github.com/cairn-dev/cairn/services/kubelet/node"
)

// KubeletKubeconfig is the kubeconfig (user system:node:<name>, group
// system:nodes) that `cairn up` writes for its node.
const KubeletKubeconfig = "kubelet.kubeconfig"

// nodeService runs one real node in process: a private containerd in a
// network namespace of its own (package kubelet/node) and the kubelet on
// it through CRI.
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
	if os.Geteuid() != 0 {
		return errors.New("the node needs root (containerd, network namespaces, cgroups): run as root, or with --node=false")
	}
	rc, err := s.cp.clientConfig(apiserver.NodeUserPrefix+s.name, []string{apiserver.GroupNodes}, KubeletKubeconfig)
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(consumer.WrapConfig(rc))
	if err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	cidr, err := kubelet.AwaitPodCIDR(wctx, client, s.name)
	cancel()
	if err != nil {
		return err
	}
	log := s.cp.log.With("service", "node", "node", s.name)
	rt, err := node.Start(ctx, node.Config{Dir: filepath.Join(s.cp.paths.Root, "node"), NetNS: NetNSName(s.cp.paths.Root),
		CreateNetNS: true, PodCIDR: cidr}, log)
	if err != nil {
		return fmt.Errorf("node runtime: %w", err)
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := rt.Stop(sctx); err != nil {
			log.Warn("stopping the node runtime", "err", err)
		}
	}()
	crt, err := cri.New(cri.Config{Runtime: rt.RuntimeService(), Image: rt.ImageService(), CgroupParent: rt.CgroupParent(), Log: log})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("kubelet listen: %w", err)
	}
	s.addr = "https://" + ln.Addr().String()
	k, err := kubelet.New(kubelet.Config{RestConfig: rc, Client: client, JS: s.cp.cp.JS, NodeName: s.name, Runtime: crt,
		NodeIP: "127.0.0.1", RootDir: filepath.Join(s.cp.paths.Root, "kubelet"), Dial: rt.DialContext,
		ServerListener: ln, Log: log})
	if err != nil {
		ln.Close()
		return err
	}
	ready()
	return k.Run(ctx)
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
