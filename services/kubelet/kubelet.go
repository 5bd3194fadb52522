package kubelet

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/events/consumer"
	"github.com/cairn-dev/cairn/services/eventrecord"
	"github.com/cairn-dev/cairn/services/kubelet/container"
	"github.com/cairn-dev/cairn/services/kubelet/dns"
)

// ErrConfig is returned by New for an incomplete Config.
var ErrConfig = errors.New("kubelet: bad config")

// HollowLabel marks the Node of a hollow kubelet (Info.Simulated runtime).
const HollowLabel = "cairn.dev/hollow"

// LeaseNamespace holds the nodes' heartbeat Leases.
const LeaseNamespace = "kube-node-lease"

// Version is the kubelet version reported in node info.
const Version = "v1.37.2-cairn"

// Config configures a kubelet.
type Config struct {
	// RestConfig reaches the apiserver as this node (user
	// system:node:<name>, group system:nodes) or as an admin. The Events
	// are always written through a client of their own built from it
	// (eventrecord.NewClient: 50 writes per second, bursts of 100).
	RestConfig *rest.Config
	// Client, if set, is used instead of one built from RestConfig for
	// everything but Events; hollow nodes share one. It must be built
	// from consumer.WrapConfig so writes carry their causation.
	Client kubernetes.Interface
	// JS reads the log.
	JS jetstream.JetStream
	// Manager, if set, is the consumer.Manager the kubelet's pod cache
	// lives on (its owner runs it); nil: the kubelet builds one from
	// RestConfig and JS and runs it.
	Manager  *consumer.Manager
	NodeName string
	Runtime  container.Runtime

	// NodeIP is the node's InternalIP and the pods' hostIP; empty picks the
	// first non-loopback IPv4 address of the machine.
	NodeIP string
	// Hostname is reported as the Hostname address; empty is NodeName.
	Hostname string
	// Capacity overrides machine values (cpu, memory, pods,
	// ephemeral-storage); Allocatable overrides the allocatable values,
	// which otherwise equal the capacity.
	Capacity, Allocatable corev1.ResourceList
	// Labels are added to the node's labels.
	Labels map[string]string
	// Taints are set on the node when it registers.
	Taints []corev1.Taint

	// RootDir holds per-pod directories (volumes) and container logs
	// (RootDir/logs/pods). Required unless the runtime is simulated.
	RootDir string
	// PluginRegistrationDir, if set, is the kubelet's plugin registration
	// directory (kube's /var/lib/kubelet/plugins_registry): CSI drivers
	// whose registration sockets appear there are registered (the node's
	// CSINode, topology labels) and the pods' claims bound to their
	// volumes are staged and published under RootDir (required then).
	// Empty: no CSI, claims stay unmounted (hollow nodes).
	PluginRegistrationDir string
	// ClusterDNS are the cluster DNS Service's addresses (kubelet
	// --cluster-dns), the nameservers of ClusterFirst pods; empty makes
	// those pods use the node's resolver, with a MissingClusterDNS Event.
	ClusterDNS []string
	// ClusterDomain is the cluster's DNS domain (--cluster-domain), e.g.
	// cluster.local: the search domains of ClusterFirst pods and the
	// domain of a pod's hostname.subdomain in its /etc/hosts.
	ClusterDomain string
	// ResolvConf is the node's resolver configuration (--resolv-conf),
	// what dnsPolicy Default pods get; empty means none (127.0.0.1).
	ResolvConf string

	// Dial reaches pod IPs (httpGet and tcpSocket probes). Nil is a plain
	// net.Dialer: fine when pods are reachable from this network namespace.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)

	// ServerAddr is where the kubelet's HTTPS server (logs, exec) listens,
	// e.g. "127.0.0.1:10250"; empty runs no server. ServerListener, if set,
	// is used instead.
	ServerAddr     string
	ServerListener net.Listener
	// ServerTLS, if set, replaces the self-signed serving certificate.
	ServerTLS *tls.Config
	// ClientCAs verify the client certificates of the HTTPS server (the
	// kubelet's --client-ca-file): a client certificate signed by one of
	// them authenticates its common name as the user and its
	// organizations as the groups; only group system:masters (the
	// apiserver's kubelet client, an admin) may then read logs or exec
	// (nodes/proxy), others get 403. A request without a verified client
	// certificate gets 401. Nil authenticates nobody: every request but
	// /healthz gets 401, the server never serves anonymous clients
	// (unless ServerTLS verifies client certificates itself).
	ClientCAs *x509.CertPool
	// StreamDial reaches the runtime's streaming server (exec); nil is Dial.
	StreamDial func(ctx context.Context, network, addr string) (net.Conn, error)

	// Timings; zero values take the defaults in parentheses.
	LeaseDuration      time.Duration // 40s
	LeaseRenewInterval time.Duration // 10s
	NodeStatusInterval time.Duration // 10s: check for node status changes
	NodeStatusReport   time.Duration // 5m: report even when unchanged
	RelistPeriod       time.Duration // 1s: poll the runtime for changes
	ResyncPeriod       time.Duration // 30s: sync a pod with nothing new
	BackOffInitial     time.Duration // 10s
	BackOffMax         time.Duration // 5m

	Log *slog.Logger
	// Clock is the time source; nil is time.Now.
	Clock func() time.Time
}

func (c *Config) defaults() error {
	if c.RestConfig == nil || c.JS == nil || c.NodeName == "" || c.Runtime == nil {
		return fmt.Errorf("kubelet: RestConfig, JS, NodeName and Runtime are required: %w", ErrConfig)
	}
	if c.PluginRegistrationDir != "" && c.RootDir == "" {
		return fmt.Errorf("kubelet: PluginRegistrationDir needs RootDir: %w", ErrConfig)
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.LeaseDuration, 40*time.Second)
	def(&c.LeaseRenewInterval, 10*time.Second)
	def(&c.NodeStatusInterval, 10*time.Second)
	def(&c.NodeStatusReport, 5*time.Minute)
	def(&c.RelistPeriod, time.Second)
	def(&c.ResyncPeriod, 30*time.Second)
	def(&c.BackOffInitial, 10*time.Second)
	def(&c.BackOffMax, 5*time.Minute)
	if c.Hostname == "" {
		c.Hostname = c.NodeName
	}
	if c.Dial == nil {
		var d net.Dialer
		c.Dial = d.DialContext
	}
	if c.StreamDial == nil {
		c.StreamDial = c.Dial
	}
	return nil
}

// Kubelet is one node's agent. Build it with New and start it with Run.
type Kubelet struct {
	cfg    Config
	log    *slog.Logger
	now    func() time.Time
	client kubernetes.Interface
	rt     container.Runtime
	pods   *consumer.Cache[*corev1.Pod]
	// services feeds the containers' Service environment variables: the
	// whole cluster's Services, shared with any other consumer of the
	// manager (a hollow node's siblings, the proxy).
	services *consumer.Cache[*corev1.Service]
	dns      *dns.Configurer
	// m is the manager of the pod cache; own when the kubelet built it.
	m   *consumer.Manager
	own bool

	workers  *workers
	probes   *prober
	crashes  *backoff // per container: restart back-off
	pulls    *backoff // per image: pull back-off
	tokens   *tokenManager
	nodeIP   string
	listener net.Listener
	port     int32

	// Set by Run before anything else starts.
	info container.Info
	// events records the kubelet's Events; nil on a simulated runtime,
	// which records none.
	events *eventrecord.Recorder

	// csi is the CSI plugin manager; nil without PluginRegistrationDir.
	csi *csiPlugins
	// csiMu serialises the node's stage, publish and their undoing, so
	// that a global mount is never unstaged while another pod stages it.
	csiMu sync.Mutex
}

// New builds a kubelet. It does not contact anything; Run does.
func New(cfg Config) (*Kubelet, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	log := cfg.Log.With("node", cfg.NodeName)
	m, own := cfg.Manager, false
	if m == nil {
		var err error
		if m, err = consumer.NewManager(consumer.ManagerOptions{RestConfig: cfg.RestConfig, JS: cfg.JS, Conns: 8, Log: log}); err != nil {
			return nil, fmt.Errorf("kubelet: new: %w", err)
		}
		own = true
	}
	client := cfg.Client
	if client == nil {
		client = m.Client()
	}
	pods, err := consumer.CacheFor[*corev1.Pod](m, corev1.SchemeGroupVersion.WithResource("pods"), consumer.OnNode(cfg.NodeName))
	if err != nil {
		return nil, fmt.Errorf("kubelet: new: %w", err)
	}
	services, err := consumer.CacheFor[*corev1.Service](m, corev1.SchemeGroupVersion.WithResource("services"))
	if err != nil {
		return nil, fmt.Errorf("kubelet: new: %w", err)
	}
	dnsConf, err := newDNSConfigurer(cfg)
	if err != nil {
		return nil, err
	}
	k := &Kubelet{
		cfg: cfg, log: log, now: cfg.Clock, client: client, rt: cfg.Runtime, pods: pods, m: m, own: own,
		services: services, dns: dnsConf,
		crashes: newBackoff(cfg.BackOffInitial, cfg.BackOffMax, cfg.Clock),
		pulls:   newBackoff(cfg.BackOffInitial, cfg.BackOffMax, cfg.Clock),
		tokens:  newTokenManager(client, cfg.Clock),
		nodeIP:  cfg.NodeIP,
	}
	k.dns.Warn = k.dnsWarning
	if cfg.PluginRegistrationDir != "" {
		k.csi = newCSIPlugins(k, cfg.PluginRegistrationDir)
	}
	k.workers = newWorkers(k)
	if n, ok := cfg.Runtime.(container.Notifier); ok {
		n.SetNotify(func(uid string) { k.workers.kickUID(types.UID(uid)) })
	}
	k.probes = newProber(k)
	pods.AddHandler(consumer.Handler[*corev1.Pod]{
		OnAdd:    func(p *corev1.Pod, ev *events.Event) { k.workers.update(p, nil, ev) },
		OnUpdate: func(old, p *corev1.Pod, ev *events.Event) { k.workers.update(p, old, ev) },
		OnDelete: func(p *corev1.Pod, ev *events.Event) { k.workers.update(p, nil, ev) },
	})
	if k.nodeIP == "" {
		k.nodeIP = machineIP()
	}
	return k, nil
}

// Run registers the node and runs the kubelet until ctx ends: the pod cache
// (this node's pods only), the pod workers, the lease and node status loops,
// the runtime relist, the Event recorder (unless the runtime is simulated)
// and, if configured, the HTTPS server. It returns nil
// when ctx ends, after every goroutine it started has returned.
func (k *Kubelet) Run(ctx context.Context) error {
	info, err := k.rt.Info(ctx)
	if err != nil {
		return fmt.Errorf("kubelet: runtime info: %w", err)
	}
	k.info = info
	if !info.Simulated && k.cfg.RootDir == "" {
		return fmt.Errorf("kubelet: RootDir is required with runtime %s: %w", info.Name, ErrConfig)
	}
	// A hollow kubelet with CSI mounts real volumes: it reports on them.
	if !info.Simulated || k.csi != nil {
		if k.events, err = k.newRecorder(); err != nil {
			return err
		}
		k.eventf(ctx, k.nodeRef(), corev1.EventTypeNormal, ReasonStarting, "Starting kubelet.")
	}
	if err := k.listen(); err != nil {
		return err
	}
	if err := k.register(ctx); err != nil {
		k.closeListener()
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	runners := []consumer.Runner{
		consumer.RunnerFunc(k.leaseLoop),
		consumer.RunnerFunc(k.nodeStatusLoop),
		consumer.RunnerFunc(k.relistLoop),
		consumer.RunnerFunc(k.workers.run),
		consumer.RunnerFunc(k.probes.run),
	}
	if k.listener != nil {
		runners = append(runners, consumer.RunnerFunc(k.serve))
	}
	if k.csi != nil {
		runners = append(runners, consumer.RunnerFunc(k.csi.run))
	}
	if k.csi != nil || !info.Simulated {
		// A real node's pods leave tmpfs mounts and directories behind.
		runners = append(runners, consumer.RunnerFunc(k.orphanLoop))
	}
	if k.own {
		runners = append(runners, k.m)
	}
	if err := consumer.RunAll(ctx, runners...); err != nil {
		return fmt.Errorf("kubelet: %w", err)
	}
	return nil
}

// Run builds a kubelet from cfg and runs it until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	k, err := New(cfg)
	if err != nil {
		return err
	}
	return k.Run(ctx)
}

// Pods is the kubelet's cache of its node's pods (for tests and the server).
func (k *Kubelet) Pods() *consumer.Cache[*corev1.Pod] { return k.pods }

// Port is the HTTPS server's port, 0 when there is none. Valid after Run
// started (or New when ServerListener was given).
func (k *Kubelet) Port() int32 { return k.port }

// machineIP is the first non-loopback IPv4 address, or 127.0.0.1.
func machineIP() string {
	addrs, err := net.InterfaceAddrs()
	if err == nil {
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
				return n.IP.String()
			}
		}
	}
	return "127.0.0.1"
}
