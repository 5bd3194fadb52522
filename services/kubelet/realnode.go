package kubelet

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/cairn-dev/cairn/events/consumer"
	"github.com/cairn-dev/cairn/ops/images"
	"github.com/cairn-dev/cairn/services/kubelet/cri"
	"github.com/cairn-dev/cairn/services/kubelet/node"
	"github.com/cairn-dev/cairn/services/proxy"
)

// ErrNotRoot is returned by RunNode when the process is not root.
var ErrNotRoot = errors.New("kubelet: a real node needs root (containerd, network namespaces, cgroups)")

// NodeConfig configures a real node: its container runtime (a private
// containerd, package node) and the kubelet on it.
type NodeConfig struct {
	// RestConfig reaches the apiserver as the node.
	RestConfig *rest.Config
	JS         jetstream.JetStream
	NodeName   string
	// Dir holds the node's containerd state (Dir/node) and the kubelet's
	// pod directories and logs (Dir/kubelet), and its plugin registration
	// directory (PluginRegistrationDir), where CSI drivers register.
	Dir string
	// NetNS is the network namespace of the node's pods, created if
	// missing and deleted at the end.
	NetNS string
	// Listener serves the kubelet's HTTPS API (logs, exec).
	Listener net.Listener
	// ClientCAs authenticate the clients of the HTTPS API (Config.ClientCAs;
	// the cluster CA, so that the apiserver's kubelet client gets in). Nil
	// refuses every request for logs or exec.
	ClientCAs *x509.CertPool
	// NodeIP is the address the apiserver reaches the kubelet at.
	NodeIP string
	// Proxy, if set, runs the node's service proxy (package proxy) in
	// NetNS next to the kubelet: its own credentials (user
	// system:kube-proxy) and the cluster's pod range. Nil: no proxy.
	Proxy *ProxyConfig
	// ClusterDNS, ClusterDomain and ResolvConf are the kubelet's
	// (Config), the pods' resolver configuration.
	ClusterDNS    []string
	ClusterDomain string
	ResolvConf    string
	// CoreDNSBinary, if set, is built into the image cairn.local/coredns
	// that the node imports (images.Options.CoreDNS): cairn up passes its
	// own executable.
	CoreDNSBinary string
	// Ready is called once the node runs (optional).
	Ready func()
	Log   *slog.Logger
}

// ProxyConfig is what a node's proxy needs besides the node's JetStream,
// name and namespace.
type ProxyConfig struct {
	RestConfig  *rest.Config
	ClusterCIDR string
	Metrics     prometheus.Registerer
}

// RunNode runs a real node until ctx ends: it waits for the node's pod CIDR
// from the control plane (AwaitPodCIDR), starts the container runtime in
// NetNS with it, runs the kubelet on it through CRI, and at the end stops
// the runtime (every pod's containers and sandbox, containerd, the
// namespace) and unmounts the pods' in-memory volumes. A containerd that a killed predecessor left running on Dir is
// adopted by the start, or stopped (node.Clean) if RunNode ends before it.
func RunNode(ctx context.Context, cfg NodeConfig) error {
	if os.Geteuid() != 0 {
		return ErrNotRoot
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	client, err := kubernetes.NewForConfig(consumer.WrapConfig(cfg.RestConfig))
	if err != nil {
		return fmt.Errorf("kubelet: %w", err)
	}
	ncfg := node.Config{Dir: filepath.Join(cfg.Dir, "node"), NetNS: cfg.NetNS, CreateNetNS: true}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	ncfg.PodCIDR, err = AwaitPodCIDR(wctx, client, cfg.NodeName)
	cancel()
	if err != nil {
		// Stopped before the runtime started, so nothing adopted what a
		// crashed predecessor may have left running: stop it.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		ncfg.PodCIDR = ""
		cerr := node.Clean(cctx, ncfg, log)
		if cerr != nil {
			// Logged here too: a stop that cancelled ctx drops err.
			log.Warn("stopping what a killed predecessor left on the node", "err", cerr)
		}
		return errors.Join(err, cerr)
	}
	if cfg.CoreDNSBinary != "" {
		if ncfg.Images, err = (images.Options{CoreDNS: cfg.CoreDNSBinary}).Build(ctx, filepath.Join(ncfg.Dir, "images")); err != nil {
			return fmt.Errorf("kubelet: node images: %w", err)
		}
	}
	rt, err := node.Start(ctx, ncfg, log)
	if err != nil {
		return fmt.Errorf("kubelet: node runtime: %w", err)
	}
	rootDir := filepath.Join(cfg.Dir, "kubelet")
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := rt.Stop(sctx); err != nil {
			log.Warn("stopping the node runtime", "err", err)
		}
		// The pods are gone from the runtime; their tmpfs volumes go too,
		// rather than stay mounted on the host.
		if err := UnmountMemoryVolumes(rootDir); err != nil {
			log.Warn("unmounting the pods' in-memory volumes", "err", err)
		}
	}()
	crt, err := cri.New(cri.Config{Runtime: rt.RuntimeService(), Image: rt.ImageService(), CgroupParent: rt.CgroupParent(), Log: log})
	if err != nil {
		return err
	}
	k, err := New(Config{RestConfig: cfg.RestConfig, Client: client, JS: cfg.JS, NodeName: cfg.NodeName, Runtime: crt,
		NodeIP: cfg.NodeIP, RootDir: rootDir, PluginRegistrationDir: PluginRegistrationDir(cfg.Dir), Dial: rt.DialContext, ServerListener: cfg.Listener, ClientCAs: cfg.ClientCAs, Log: log,
		ClusterDNS: cfg.ClusterDNS, ClusterDomain: cfg.ClusterDomain, ResolvConf: cfg.ResolvConf})
	if err != nil {
		return err
	}
	runners := []consumer.Runner{k}
	if p := cfg.Proxy; p != nil {
		plog := log.With("component", "proxy")
		runners = append(runners, consumer.RunnerFunc(func(ctx context.Context) error {
			// As kube-proxy is a process of its own, a failing proxy (nft
			// missing, say) is retried without taking the kubelet down.
			for {
				err := proxy.RunNode(ctx, proxy.NodeConfig{RestConfig: p.RestConfig, JS: cfg.JS, NodeName: cfg.NodeName,
					NetNS: rt.NetNSPath(), ClusterCIDR: p.ClusterCIDR, Metrics: p.Metrics, Log: plog})
				if ctx.Err() != nil {
					return nil
				}
				plog.Error("node proxy failed; restarting it in 10s", "err", err)
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(10 * time.Second):
				}
			}
		}))
	}
	if cfg.Ready != nil {
		cfg.Ready()
	}
	return consumer.RunAll(ctx, runners...)
}

// PluginRegistrationDir is the plugin registration directory of the real
// node on dir (NodeConfig.Dir): dir/kubelet/plugins_registry, as kube's
// /var/lib/kubelet/plugins_registry, or /run/cairn-kubelet/<hash of
// dir>/plugins_registry when that path leaves too little room for the
// sockets in it (a unix socket path has at most 107 bytes).
func PluginRegistrationDir(dir string) string {
	p := filepath.Join(dir, "kubelet", "plugins_registry")
	if len(p) > 60 {
		sum := sha256.Sum256([]byte(dir))
		p = filepath.Join("/run/cairn-kubelet", hex.EncodeToString(sum[:6]), "plugins_registry")
	}
	return p
}
