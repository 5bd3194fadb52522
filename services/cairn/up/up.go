package up

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/cairn-dev/cairn/services/apiserver/kubeconfig"
	"github.com/cairn-dev/cairn/services/controlplane"
	"github.com/cairn-dev/cairn/services/pki"
	"github.com/cairn-dev/cairn/services/supervisor"
)

// ErrLocked means another process runs on the same data directory.
var ErrLocked = errors.New("up: data directory in use")

// Config is what `cairn up` is told on its command line.
type Config struct {
	// DataDir holds all state; created if missing.
	DataDir string
	// Listen is the apiserver's address, host:port.
	Listen string
	// EtcdEndpoints are the client URLs of an external etcd cluster; empty
	// runs an embedded etcd under DataDir.
	EtcdEndpoints []string
	// NATSURL is the URL of an external NATS cluster; empty runs an
	// embedded NATS server with JetStream under DataDir.
	NATSURL string
	// Hosts are extra names and addresses for the apiserver's serving
	// certificate.
	Hosts []string
	// Node runs a real node in process (containerd through CRI, the CNI
	// bridge in a network namespace of its own, the kubelet); needs root.
	Node bool
	// NodeName names it; empty is the host name.
	NodeName string
	// RebuildHistory rebuilds the history store (DataDir/history.db) from
	// the whole log at start.
	RebuildHistory bool
	// ServiceClusterIPRange, ServiceNodePortRange and AdvertiseAddress are
	// the apiserver's (controlplane.Config); empty means its defaults.
	ServiceClusterIPRange string
	ServiceNodePortRange  string
	AdvertiseAddress      string
	// ServiceAccountIssuer, APIAudiences and MaxTokenExpiration are the
	// apiserver's service-account token settings (controlplane.Config);
	// empty means its defaults.
	ServiceAccountIssuer string
	APIAudiences         []string
	MaxTokenExpiration   time.Duration
	// RequestTimeout is the apiserver's (controlplane.Config).
	RequestTimeout time.Duration
	// LogBackpressure is the apiserver's (controlplane.Config).
	LogBackpressure time.Duration
	// DisableProfiling is the apiserver's (controlplane.Config).
	DisableProfiling bool
	// PriorityAndFairness and MaxRequestsInFlight are the apiserver's API
	// Priority and Fairness settings (controlplane.Config).
	PriorityAndFairness bool
	MaxRequestsInFlight int
	// DNS is the cluster DNS and the node's resolver settings (see
	// DNSConfig).
	DNS DNSConfig
	// ClusterInit starts the first server of a cluster that others join
	// (cluster.go); Join, fetched by FetchJoin, joins one. ClusterPorts
	// are the ports of its etcd and NATS on the host of Listen.
	ClusterInit  bool
	Join         *Join
	ClusterPorts ClusterPorts

	cluster *controlplane.Cluster
}

// Paths is the layout of a data directory. All fields are absolute.
type Paths struct {
	Root       string
	Lock       string // held exclusively while a cairn process runs on Root
	PKI        string // see package pki
	Kubeconfig string // the admin kubeconfig
	Etcd       string // the embedded etcd's data
	NATS       string // the embedded NATS server's JetStream store
	History    string // the history projection's store (bbolt)
	Log        string // cairn up's structured log (see OpenLog)
	ServerID   string // this server's identity, written once (see ServerID)
}

// PathsOf returns the layout of the data directory dir.
func PathsOf(dir string) (Paths, error) {
	root, err := filepath.Abs(dir)
	if err != nil {
		return Paths{}, fmt.Errorf("up: data dir: %w", err)
	}
	return Paths{
		Root:       root,
		Lock:       filepath.Join(root, "lock"),
		PKI:        filepath.Join(root, "pki"),
		Kubeconfig: filepath.Join(root, "kubeconfig"),
		Etcd:       filepath.Join(root, "etcd"),
		NATS:       filepath.Join(root, "nats"),
		History:    filepath.Join(root, "history.db"),
		Log:        filepath.Join(root, "cairn.log"),
		ServerID:   filepath.Join(root, "server-id"),
	}, nil
}

// ServerID returns the identity of the server whose data directory holds
// path, creating it on first use as "<hostname>-<random>": unique among
// servers, the same across restarts on this data directory. It names the
// server in the log publisher's election, so that a restarted server takes
// over at once what its dead predecessor held. The caller holds the data
// directory's lock.
func ServerID(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err == nil {
		if id := strings.TrimSpace(string(b)); id != "" {
			return id, nil
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("up: server id: %w", err)
	}
	var r [6]byte
	if _, err := rand.Read(r[:]); err != nil {
		return "", fmt.Errorf("up: server id: %w", err)
	}
	id := nodeName() + "-" + hex.EncodeToString(r[:])
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(id+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("up: server id: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", fmt.Errorf("up: server id: %w", err)
	}
	return id, nil
}

// Run brings the cluster up, reports each part to out (see Reporter) as it
// becomes ready, and blocks until ctx is cancelled or a service fails; then
// it stops everything in reverse order and returns. It returns nil after a
// clean stop on cancellation. Structured records go to log only (cairn up
// passes the logger of OpenLog).
func Run(ctx context.Context, log *slog.Logger, out io.Writer, cfg Config) error {
	paths, err := PathsOf(cfg.DataDir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(paths.Root, 0o700); err != nil {
		return fmt.Errorf("up: data dir: %w", err)
	}
	unlock, err := lock(paths.Lock)
	if err != nil {
		return err
	}
	defer unlock()
	log.Info("up: starting", "dataDir", paths.Root, "pid", os.Getpid())

	server, hosts, err := apiserverURL(cfg.Listen)
	if err != nil {
		return err
	}
	rep := NewReporter(out)
	if cfg.Join != nil && !Clustered(paths.Root) {
		if err := writeJoin(paths, cfg.Join); err != nil {
			return err
		}
		rep.Ready("join", "PKI of the cluster at "+cfg.Join.Server+" written")
	}
	p, err := pki.Load(paths.PKI, append(hosts, cfg.Hosts...))
	if err != nil {
		return fmt.Errorf("up: %w", err)
	}
	rep.Ready("pki", paths.PKI)

	if err := kubeconfig.Write(paths.Kubeconfig, server, p.CAPEM, p.AdminCertPEM, p.AdminKeyPEM, pki.AdminUser); err != nil {
		return fmt.Errorf("up: %w", err)
	}
	rep.Written("kubeconfig", paths.Kubeconfig)

	id, err := ServerID(paths.ServerID)
	if err != nil {
		return err
	}
	if cfg.cluster, err = clusterConfig(cfg, paths, id); err != nil {
		return err
	}
	svcs := services(cfg, paths, p, id, log, rep)
	opts := supervisor.Options{
		Log: log,
		OnReady: func(name, detail string) {
			if name == controlPlaneName {
				return // etcd, NATS, the log, the apiserver and the history had a line each
			}
			rep.Ready(name, detail)
		},
		OnAllReady: func() { rep.AllReady(len(svcs), paths.Log, paths.Kubeconfig) },
	}
	if !cfg.Node {
		// A node an earlier run left (killed) is not this run's to keep.
		if err := cleanNode(ctx, paths, log); err != nil {
			return err
		}
	}
	err = supervisor.Run(ctx, opts, svcs...)
	if cfg.Node {
		// The node service stops its runtime; this stops what a killed
		// predecessor left when the node service never got to adopt it
		// (stopped or failed before its turn).
		err = errors.Join(err, cleanNode(ctx, paths, log))
	}
	if err != nil {
		return fmt.Errorf("up: %w", err)
	}
	return nil
}

// apiserverURL returns the URL clients use to reach an apiserver listening
// on listen, and the hosts its serving certificate must cover for that. A
// wildcard listen address is reached on loopback.
func apiserverURL(listen string) (url string, hosts []string, err error) {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "", nil, fmt.Errorf("up: listen address %q: %w", listen, err)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return "https://" + net.JoinHostPort(host, port), []string{host}, nil
}

// lock takes an exclusive, non-blocking flock on path. The kernel drops it
// when the process dies, so a crash never leaves a stale lock.
func lock(path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("up: lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("up: %s: %w", filepath.Dir(path), ErrLocked)
		}
		return nil, fmt.Errorf("up: lock: %w", err)
	}
	return func() { f.Close() }, nil
}
