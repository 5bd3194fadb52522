package up

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/cairn-dev/cairn/ops/images"
	"github.com/cairn-dev/cairn/services/apiserver/servicealloc"
	"github.com/cairn-dev/cairn/services/clusterdns"
)

// DNSConfig is the cluster DNS of `cairn up` and its node's kubelet flags.
type DNSConfig struct {
	// Disabled deploys no cluster DNS (the objects already there stay).
	Disabled bool
	// ClusterDNS are the node's --cluster-dns; nil is the kube-dns
	// Service's address, the tenth of the Service range (10.96.0.10).
	ClusterDNS []string
	// ClusterDomain; empty is cluster.local.
	ClusterDomain string
	// Forward is the Corefile's upstream for other names (e.g.
	// /etc/resolv.conf, kubeadm's); empty forwards nothing, so no query
	// leaves the cluster.
	Forward string
	// ResolvConf is the node's resolver configuration (--resolv-conf).
	ResolvConf string
}

func serviceRange(cfg Config) (servicealloc.IPRange, error) {
	cidr := cfg.ServiceClusterIPRange
	if cidr == "" {
		cidr = servicealloc.DefaultClusterIPRange
	}
	return servicealloc.ParseIPRange(cidr)
}

// dnsServiceIP is kube-dns's address: the tenth of the Service range, as
// kubeadm picks it.
func dnsServiceIP(cfg Config) (string, error) {
	r, err := serviceRange(cfg)
	if err != nil {
		return "", err
	}
	if r.Size() < 10 {
		return "", fmt.Errorf("up: service range %s is too small for kube-dns", r)
	}
	return r.At(9).String(), nil
}

func dnsServers(cfg Config) []string {
	if cfg.DNS.ClusterDNS != nil {
		return cfg.DNS.ClusterDNS
	}
	ip, err := dnsServiceIP(cfg)
	if err != nil {
		return nil
	}
	return []string{ip}
}

func clusterDomain(cfg Config) string {
	if cfg.DNS.ClusterDomain == "" {
		return "cluster.local"
	}
	return cfg.DNS.ClusterDomain
}

// coreDNSBinary is this executable, which the node builds into the CoreDNS
// image (`cairn coredns`); empty (no image) when it cannot be found.
func coreDNSBinary(log *slog.Logger) string {
	exe, err := os.Executable()
	if err != nil {
		log.Warn("no CoreDNS image: cannot find this executable", "err", err)
		return ""
	}
	return exe
}

// CoreDNSKubeconfig is the kubeconfig (user system:coredns) that `cairn up`
// issues once and stores in the Secret kube-system/coredns-kubeconfig.
const CoreDNSKubeconfig = "coredns.kubeconfig"

// clusterDNSService deploys the cluster DNS into the cluster at every
// start (clusterdns.Ensure) and then waits: CoreDNS runs as the pods of the
// Deployment kube-system/coredns.
type clusterDNSService struct {
	cp *controlPlaneService
	ip string
}

func (s *clusterDNSService) Name() string { return "cluster-dns" }

func (s *clusterDNSService) Describe() string {
	if s.cp.cfg.DNS.Disabled {
		return "disabled"
	}
	return clusterdns.ServiceName + " " + s.ip + " (" + images.CoreDNSRef + ")"
}

func (s *clusterDNSService) Run(ctx context.Context, ready func()) error {
	if s.cp.cfg.DNS.Disabled {
		ready()
		<-ctx.Done()
		return nil
	}
	opts, err := s.options()
	if err != nil {
		return err
	}
	rc, err := clientcmd.BuildConfigFromFlags("", s.cp.paths.Kubeconfig)
	if err != nil {
		return fmt.Errorf("up: cluster dns: %w", err)
	}
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return fmt.Errorf("up: cluster dns: %w", err)
	}
	log := s.cp.log.With("service", "cluster-dns")
	for {
		err := clusterdns.Ensure(ctx, client, opts, log)
		if err == nil {
			break
		}
		log.Warn("deploying the cluster DNS", "err", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(2 * time.Second):
		}
	}
	ready()
	<-ctx.Done()
	return nil
}

// options are the objects' options: kube-dns at the tenth address of the
// Service range, and CoreDNS's credentials, a client certificate for user
// system:coredns in a kubeconfig that reaches the apiserver through the
// kubernetes Service (its first address), verified as
// kubernetes.default.svc. cairn has no ServiceAccount tokens yet; when it
// has, the Secret can give way to the pod's ServiceAccount.
func (s *clusterDNSService) options() (clusterdns.Options, error) {
	ip, err := dnsServiceIP(s.cp.cfg)
	if err != nil {
		return clusterdns.Options{}, err
	}
	s.ip = ip
	r, err := serviceRange(s.cp.cfg)
	if err != nil {
		return clusterdns.Options{}, err
	}
	// Issued once and kept in the data directory, so that a restart
	// leaves the Secret as it is.
	path := filepath.Join(s.cp.paths.Root, CoreDNSKubeconfig)
	kc, err := os.ReadFile(path)
	if err != nil {
		cert, key, err := s.cp.pki.IssueClient(clusterdns.User, nil)
		if err != nil {
			return clusterdns.Options{}, err
		}
		if kc, err = clusterdns.Kubeconfig("https://"+r.At(0).String()+":443", "kubernetes.default.svc", s.cp.pki.CAPEM, cert, key); err != nil {
			return clusterdns.Options{}, err
		}
		if err := os.WriteFile(path, kc, 0o600); err != nil {
			return clusterdns.Options{}, fmt.Errorf("up: cluster dns: %w", err)
		}
	}
	return clusterdns.Options{ClusterIP: ip, Domain: clusterDomain(s.cp.cfg), Forward: s.cp.cfg.DNS.Forward, Kubeconfig: kc}, nil
}
