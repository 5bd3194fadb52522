package controlplane

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"path/filepath"
	"runtime"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/events/publish"
	history "github.com/cairn-dev/cairn/projections/history/service"
	"github.com/cairn-dev/cairn/schemas"
	"github.com/cairn-dev/cairn/schemas/custom"
	"github.com/cairn-dev/cairn/schemas/discovery"
	"github.com/cairn-dev/cairn/schemas/openapi"
	"github.com/cairn-dev/cairn/services/apiserver"
	"github.com/cairn-dev/cairn/services/apiserver/crds"
	"github.com/cairn-dev/cairn/services/apiserver/csradmission"
	"github.com/cairn-dev/cairn/services/apiserver/policy"
	"github.com/cairn-dev/cairn/services/apiserver/rbac"
	"github.com/cairn-dev/cairn/services/apiserver/serviceaccount"
	"github.com/cairn-dev/cairn/services/apiserver/servicealloc"
	"github.com/cairn-dev/cairn/services/apiserver/storage"
	"github.com/cairn-dev/cairn/services/apiserver/volumeadmission"
	"github.com/cairn-dev/cairn/services/apiserver/watchhub"
	"github.com/cairn-dev/cairn/services/apiserver/webhook"
	"github.com/cairn-dev/cairn/services/embedded"
	"github.com/cairn-dev/cairn/services/pki/satoken"
	"github.com/cairn-dev/cairn/services/supervisor"
)

// Config configures a control plane.
type Config struct {
	// DataDir holds the embedded etcd (etcd/) and NATS (nats/) state.
	DataDir string
	// EtcdEndpoints use an external etcd instead of the embedded one.
	EtcdEndpoints []string
	// NATSURL uses an external NATS server instead of the embedded one.
	NATSURL string
	// StreamReplicas for the log streams (3 on a NATS cluster).
	StreamReplicas int
	// Cluster makes the embedded etcd and NATS members of a cluster of
	// servers (see Cluster); nil runs them alone on loopback.
	Cluster *Cluster
	// Listener serves the apiserver; nil listens on Listen.
	Listener net.Listener
	Listen   string
	// TLS serves HTTPS; nil serves plain HTTP (tests only).
	TLS *tls.Config
	// KubeletClientTLS is how the apiserver reaches kubelets for pods/log
	// and pods/exec (apiserver.Config.KubeletClientTLS): with
	// pki.KubeletClientTLSConfig, a client certificate kubelets accept.
	// Nil presents none, and kubelets refuse logs and exec (401).
	KubeletClientTLS *tls.Config
	Authenticator    apiserver.Authenticator
	// ClusterCA is the cluster CA certificate (PEM), served at /cacerts
	// to nodes that join (join.go); nil serves none.
	ClusterCA []byte
	// Authorizer, if set, decides requests instead of the RBAC authorizer
	// (which still runs: the policy is reconciled and served, escalation
	// is checked); benchmarks compare RBAC against AlwaysAllow with it.
	Authorizer apiserver.Authorizer
	Admission  []apiserver.AdmissionPlugin
	// ServiceAccountKeyDir holds the service-account signing key
	// (pki.LoadServiceAccountKeys: sa.key, sa.pub, retired sa-*.pub),
	// made at the first start; empty means DataDir/pki, or without a
	// DataDir a key in memory. Every apiserver of a cluster needs the
	// same keys.
	ServiceAccountKeyDir string
	// ServiceAccountIssuer is the iss of bound tokens (kube-apiserver's
	// --service-account-issuer); empty means satoken.DefaultIssuer.
	// APIAudiences are the apiserver's audiences (--api-audiences); empty
	// means the issuer.
	ServiceAccountIssuer string
	APIAudiences         []string
	// MaxTokenExpiration caps the lifetime of requested service-account
	// tokens (kube-apiserver's --service-account-max-token-expiration); 0
	// means no cap but validation's.
	MaxTokenExpiration time.Duration
	// RequestTimeout bounds the apiserver's requests that are not
	// long-running (kube-apiserver's --request-timeout,
	// apiserver.Config); 0 means apiserver.DefaultRequestTimeout.
	RequestTimeout time.Duration
	// LogBackpressure is the apiserver's (apiserver.Config): writes are
	// held while the log is further behind them than this.
	LogBackpressure time.Duration
	// DisableProfiling is apiserver.Config's (kube-apiserver's
	// --profiling=false).
	DisableProfiling bool
	// ServiceAccountAdmission runs kube's ServiceAccount admission plugin
	// (pods get the default ServiceAccount and the token volume, and are
	// refused if their ServiceAccount does not exist). It needs the
	// serviceaccount controller, which creates every namespace's default
	// ServiceAccount and kube-root-ca.crt ConfigMap: cairn up runs both.
	ServiceAccountAdmission bool
	// NodeNetNS names the network namespace of a node's pods (webhook.Config.NodeNetNS):
	// how the apiserver reaches admission webhooks given as a service reference.
	NodeNetNS func(node string) (path string, ok bool)
	// NodeAuthorizer turns on kube's Node authorizer before RBAC and the
	// NodeRestriction admission plugin (package nodeauthz), and leaves the
	// system:node ClusterRoleBinding without subjects, as kube-apiserver
	// --authorization-mode=Node,RBAC has it: kubelets (system:node:<name>
	// in system:nodes) read only what their pods use and write only their
	// own objects.
	NodeAuthorizer bool
	// MaxRequestsInFlight is API Priority and Fairness's server
	// concurrency limit, shared out among the priority levels
	// (kube-apiserver's --max-requests-inflight plus
	// --max-mutating-requests-inflight); 0 means
	// DefaultMaxRequestsInFlight.
	MaxRequestsInFlight int
	// PriorityAndFairness puts API Priority and Fairness in front of the
	// handlers (kube-apiserver's --enable-priority-and-fairness; cairn up
	// and cairn apiserver turn it on by default, as kube does).
	PriorityAndFairness bool
	// NoFsync runs the embedded etcd without fsync (tests, benchmarks).
	NoFsync bool
	// ElectionTTL is the etcd session TTL of the publisher and compactor
	// elections: how long a dead leader of another identity keeps its
	// role. 0 means publish.DefaultSessionTTL (15s, kube's leader-election
	// lease).
	ElectionTTL time.Duration
	// Identity names this server in the publisher and compactor elections
	// (publish.PublisherConfig.Identity): unique among live servers and
	// stable across its restarts, so that a restarted server takes over at
	// once what its dead predecessor held. Empty is unique to this process
	// (a restart then waits ElectionTTL).
	Identity string
	// MaxPublishLag bounds the publish lag while /readyz's log check
	// passes (LogCheck); 0 means DefaultMaxPublishLag.
	MaxPublishLag time.Duration
	// CompactInterval for etcd compaction behind the log; 0 means 5m.
	CompactInterval time.Duration
	// HistoryPath, if set, runs the history projection (timelines, audit,
	// time travel; package projections/history) with its store in this
	// file and serves it on the apiserver under /history/.
	HistoryPath string
	// RebuildHistory rebuilds the history store from the whole log.
	RebuildHistory bool
	// ServiceClusterIPRange and ServiceNodePortRange are where Services get
	// their cluster IPs and node ports (kube-apiserver's
	// --service-cluster-ip-range and --service-node-port-range); empty
	// means 10.96.0.0/12 and 30000-32767. Every apiserver of a cluster
	// must be given the same ranges.
	ServiceClusterIPRange string
	ServiceNodePortRange  string
	// AdvertiseAddress is the IP the kubernetes Service's endpoints list
	// for this apiserver (kube-apiserver's --advertise-address); empty
	// means the IP the apiserver listens on.
	AdvertiseAddress string
	// OnReady is called as each component becomes ready: "log" once the
	// log's check first passes with the log caught up (from a goroutine of
	// its own), then "apiserver".
	OnReady func(component, detail string)
	Log     *slog.Logger
}

// ControlPlane is a running control plane.
type ControlPlane struct {
	Etcd      *clientv3.Client
	NATS      *nats.Conn
	JS        jetstream.JetStream
	Store     *storage.Store
	Hub       *watchhub.Hub
	Publisher *publish.Publisher
	Server    *apiserver.Server
	// RBAC is the RBAC authorizer (the apiserver's unless
	// Config.Authorizer replaced it).
	RBAC *rbac.Authorizer
	// ServiceAccountTokens signs and verifies service-account tokens;
	// ServiceAccountAuthenticator is the apiserver's authenticator of them.
	ServiceAccountTokens        *satoken.Tokens
	ServiceAccountAuthenticator *serviceaccount.Authenticator
	Registry                    *schemas.Registry
	// Webhooks calls the admission webhooks.
	Webhooks *webhook.Dispatcher
	// CRDs follows CustomResourceDefinitions into Registry and runs their
	// controllers.
	CRDs    *crds.Controller
	Metrics *prometheus.Registry
	// History is the history projection, nil unless Config.HistoryPath.
	History *history.Service
	// Addr is the apiserver's listen address.
	Addr string

	// LogCheck is /readyz's log check.
	LogCheck *LogCheck

	logReady chan struct{}
	// electionEtcd carries the publisher's election (see startEtcd).
	electionEtcd *clientv3.Client
	embEtcd      *embedded.Etcd
	embNATS      *embedded.NATS
	// group runs the publisher, compactor, hub, history and apiserver.
	group   *supervisor.Group
	closers []func()
}

// Start starts every component and returns once the apiserver serves and
// the log is ready (LogCheck.WaitCaughtUp: a publisher leads and the log
// holds the bootstrap writes), or ctx is done. While it waits for the log,
// the apiserver already answers, its /readyz failing on the log check.
func Start(ctx context.Context, cfg Config) (_ *ControlPlane, err error) {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	ready := cfg.OnReady
	if ready == nil {
		ready = func(string, string) {}
	}
	cp := &ControlPlane{Metrics: prometheus.NewRegistry(), logReady: make(chan struct{})}
	defer func() {
		if err != nil {
			cp.Close()
		}
	}()
	if err := cp.startEtcd(ctx, cfg, ready); err != nil {
		return nil, err
	}
	if err := cp.startNATS(ctx, cfg, ready); err != nil {
		return nil, err
	}
	if err := events.EnsureStreams(ctx, cp.JS, events.StreamConfig{Replicas: cfg.StreamReplicas, KeepReplicas: cfg.Cluster != nil}); err != nil {
		return nil, fmt.Errorf("controlplane: streams: %w", err)
	}
	cp.group = supervisor.NewGroup(context.Background())
	cp.Publisher = publish.NewPublisher(cp.Etcd, cp.JS, publish.PublisherConfig{Registerer: cp.Metrics, SessionTTL: cfg.ElectionTTL,
		Identity: cfg.Identity, ElectionClient: cp.electionEtcd}, cfg.Log)
	cp.goRun("publisher", cp.Publisher.Run)
	comp := publish.NewCompactor(cp.Etcd, cp.JS, publish.CompactorConfig{Interval: cfg.CompactInterval, SessionTTL: cfg.ElectionTTL,
		Identity: cfg.Identity}, cfg.Log)
	cp.goRun("compactor", comp.Run)
	cp.LogCheck = &LogCheck{Etcd: cp.Etcd, JS: cp.JS, Publisher: cp.Publisher, MaxLag: cfg.MaxPublishLag}

	cp.Hub = watchhub.NewHub(cp.JS, watchhub.Config{}, cfg.Log.With("component", "hub"))
	cp.goRun("hub", cp.Hub.Run)

	cp.Registry = schemas.NewRegistry()
	cp.Store = storage.New(cp.Etcd)
	svcIPs, nodePorts, err := serviceRanges(cfg)
	if err != nil {
		return nil, err
	}
	oapi, err := openapi.Dynamic(cp.Registry.All(), cp.Registry.All, cp.Registry.Generation)
	if err != nil {
		return nil, fmt.Errorf("controlplane: openapi: %w", err)
	}
	extra := map[string]http.Handler{"/openapi/": oapi}
	if cfg.HistoryPath != "" {
		cp.History, err = history.New(history.Config{Path: cfg.HistoryPath, JS: cp.JS, Rebuild: cfg.RebuildHistory,
			Registerer: cp.Metrics, Log: cfg.Log})
		if err != nil {
			return nil, fmt.Errorf("controlplane: history: %w", err)
		}
		cp.goRun("history", cp.History.Run)
		extra[history.Prefix] = cp.History.Handler()
	}
	cp.joinHandlers(cfg, extra)
	cp.serverHandlers(cfg, extra)
	az, err := cp.newAuthz(cfg)
	if err != nil {
		return nil, err
	}
	cp.RBAC = az.authorizer
	var fc *flowControl
	if cfg.PriorityAndFairness {
		if fc, err = newFlowControl(az.lb, cfg.MaxRequestsInFlight); err != nil {
			return nil, err
		}
	}
	sa, err := cp.newServiceAccounts(cfg, extra)
	if err != nil {
		return nil, err
	}
	cp.ServiceAccountTokens, cp.ServiceAccountAuthenticator = sa.tokens, sa.authn
	wh, err := webhook.New(webhook.Config{Store: cp.Store, Hub: cp.Hub, Authorizer: apiserver.CELAuthorizer(az.authorizer),
		NodeNetNS: cfg.NodeNetNS, Log: cfg.Log.With("component", "webhooks")})
	if err != nil {
		return nil, err
	}
	cp.Webhooks = wh
	policies := policy.New(policy.Config{Scheme: cp.Registry.Scheme(), Authorizer: apiserver.CELAuthorizer(az.authorizer),
		Log: cfg.Log.With("component", "admission-policies")})
	nodes := cp.newNodeAuthz(cfg)
	classes := volumeadmission.NewClasses(cp.Store, cp.Hub, cfg.Log.With("component", "storageclass-cache"))
	authn := cfg.Authenticator
	if authn == nil {
		authn = apiserver.X509Authenticator{}
	}
	authz := cmp.Or[apiserver.Authorizer](cfg.Authorizer, nodes.authorizer(az.authorizer))
	srv, err := apiserver.New(apiserver.Config{
		TLS:                cfg.TLS,
		KubeletClientTLS:   cfg.KubeletClientTLS,
		Store:              cp.Store,
		Registry:           cp.Registry,
		Hub:                cp.Hub,
		Authenticator:      apiserver.Authenticators{az.lb, cp.bootstrapTokens(cfg), sa.authn, authn},
		APIAudiences:       sa.tokens.Audiences(),
		Authorizer:         authz,
		Admission:          slices.Concat([]apiserver.AdmissionPlugin{rbac.NewEscalation(az.authorizer)}, sa.plugins(), nodes.plugins(), volumeadmission.Plugins(classes), csradmission.Plugins(authz), cfg.Admission),
		Tokens:             sa.tokens,
		MaxTokenExpiration: cfg.MaxTokenExpiration,
		RequestTimeout:     cfg.RequestTimeout,
		LogBackpressure:    cfg.LogBackpressure,
		DisableProfiling:   cfg.DisableProfiling,
		Webhooks:           wh,
		Policies:           policies,
		FlowControl:        fc.controller(),
		ServiceIPs:         svcIPs,
		NodePorts:          nodePorts,
		Discovery: discovery.Dynamic(func() []*schemas.Resource { return slices.Concat(cp.Registry.All(), apiserver.ReviewResources()) },
			cp.Registry.Generation),
		SyncCustom: func(ctx context.Context) error { return cp.CRDs.Sync(ctx) },
		UnservableCustom: func(group, version, resource string) error {
			return cp.CRDs.Unservable(group, version, resource)
		},
		Extra:       extra,
		Metrics:     cp.Metrics,
		ReadyChecks: []apiserver.ReadyCheck{{Name: "etcd", Check: cp.etcdReady}, {Name: "nats", Check: cp.natsReady}, {Name: "log", Check: cp.logCheck}},
		Version:     Version(),
		Log:         cfg.Log.With("component", "apiserver"),
	})
	if err != nil {
		return nil, err
	}
	cp.Server = srv
	converters, err := custom.NewConverters(wh.ServiceResolver(), wh.AuthenticationInfoResolverWrapper())
	if err != nil {
		return nil, err
	}
	if cp.CRDs, err = crds.New(crds.Config{Store: cp.Store, Hub: cp.Hub, Registry: cp.Registry, Loopback: srv.Loopback(),
		Converters: converters, Log: cfg.Log.With("component", "crds")}); err != nil {
		return nil, err
	}
	cp.goRun("crds", cp.CRDs.Run)
	if err := cp.CRDs.WaitSynced(ctx); err != nil {
		return nil, fmt.Errorf("controlplane: custom resources: %w", err)
	}
	if err := Bootstrap(ctx, cp.Store, cp.Registry); err != nil {
		return nil, err
	}
	if err := az.start(ctx, cp, srv, cfg.Log); err != nil {
		return nil, err
	}
	cp.goRun("admission policies", func(ctx context.Context) error {
		if err := policies.Start(ctx, az.lb.policyConfig()); err != nil {
			return err
		}
		<-ctx.Done()
		return nil
	})
	if err := sa.start(ctx, cp); err != nil {
		return nil, err
	}
	cp.goRun("webhook caches", wh.Run)
	if err := wh.WaitForSync(ctx); err != nil {
		return nil, err
	}
	if err := nodes.start(ctx, cp, az); err != nil {
		return nil, err
	}
	if fc != nil {
		if err := fc.start(ctx, cp, az.lb); err != nil {
			return nil, err
		}
	}
	cp.goRun("storageclass cache", classes.Run)
	if err := classes.WaitForSync(ctx); err != nil {
		return nil, err
	}
	// The repair loop is idempotent: every apiserver runs it.
	alloc := servicealloc.New(cp.Etcd, svcIPs, nodePorts)
	cp.goRun("service allocation repair", func(ctx context.Context) error {
		return alloc.RunRepair(ctx, 0, cfg.Log.With("component", "servicealloc"))
	})
	// After the bootstrap writes, so that the log is reported ready only
	// once they are on it.
	cp.goRun("log readiness", func(ctx context.Context) error { return cp.awaitLog(ctx, cfg.Log, ready) })
	ln := cfg.Listener
	if ln == nil {
		listen := cfg.Listen
		if listen == "" {
			listen = "127.0.0.1:6443"
		}
		if ln, err = net.Listen("tcp", listen); err != nil {
			return nil, fmt.Errorf("controlplane: listen: %w", err)
		}
	}
	cp.Addr = ln.Addr().String()
	if cfg.Cluster != nil {
		if err := cp.record(ctx, cfg); err != nil {
			ln.Close()
			return nil, err
		}
		cp.goRun("stream replicas", func(ctx context.Context) error { return cp.scaleReplicas(ctx, cfg.Log) })
	}
	if err := cp.startKubernetesService(ctx, cp.group.Context(), cfg, alloc); err != nil {
		return nil, err
	}
	served := make(chan struct{})
	cp.goRun("apiserver", func(ctx context.Context) error { return srv.Serve(ctx, ln, func() { close(served) }) })
	select {
	case <-served:
	case err := <-cp.group.Err():
		return nil, err
	}
	// The apiserver serves, but it is ready (its /readyz passes) only once
	// the log is: until then it answers, and /readyz says why not.
	select {
	case <-cp.logReady:
	case err := <-cp.group.Err():
		return nil, err
	case <-ctx.Done():
		return nil, fmt.Errorf("controlplane: waiting for the log: %w", ctx.Err())
	}
	ready("apiserver", cp.Addr)
	return cp, nil
}

// startKubernetesService creates the default/kubernetes Service if it is
// missing and starts this apiserver's lease endpoint reconciler.
func (cp *ControlPlane) startKubernetesService(ctx, runCtx context.Context, cfg Config, alloc *servicealloc.Allocator) error {
	self, err := netip.ParseAddrPort(cp.Addr)
	if err != nil {
		return fmt.Errorf("controlplane: listen address %s: %w", cp.Addr, err)
	}
	ip, err := AdvertiseAddress(cfg.AdvertiseAddress, cp.Addr)
	if err != nil {
		return err
	}
	if err := EnsureKubernetesService(ctx, cp.Store, cp.Registry, alloc, int(self.Port())); err != nil {
		return err
	}
	r := &endpointReconciler{cli: cp.Etcd, st: cp.Store, reg: cp.Registry, self: netip.AddrPortFrom(ip.Unmap(), self.Port()),
		log: cfg.Log.With("component", "endpoint-reconciler")}
	if err := r.start(ctx, runCtx); err != nil {
		return err
	}
	cp.goRun("endpoint reconciler", r.Run)
	return nil
}

// serviceRanges parses the service ranges of cfg, defaults for empty ones.
func serviceRanges(cfg Config) (servicealloc.IPRange, servicealloc.PortRange, error) {
	ipRange, portRange := cfg.ServiceClusterIPRange, cfg.ServiceNodePortRange
	if ipRange == "" {
		ipRange = servicealloc.DefaultClusterIPRange
	}
	if portRange == "" {
		portRange = servicealloc.DefaultNodePortRange
	}
	ips, err := servicealloc.ParseIPRange(ipRange)
	if err != nil {
		return servicealloc.IPRange{}, servicealloc.PortRange{}, fmt.Errorf("controlplane: --service-cluster-ip-range: %w", err)
	}
	ports, err := servicealloc.ParsePortRange(portRange)
	if err != nil {
		return servicealloc.IPRange{}, servicealloc.PortRange{}, fmt.Errorf("controlplane: --service-node-port-range: %w", err)
	}
	return ips, ports, nil
}

// goRun runs f in the control plane's group: its ctx ends with Close, and
// its error stops the group (Err).
func (cp *ControlPlane) goRun(name string, f func(ctx context.Context) error) {
	cp.group.Go(name, supervisor.RunnerFunc(f))
}

// Err reports the first fatal error of a running component.
func (cp *ControlPlane) Err() <-chan error { return cp.group.Err() }

func (cp *ControlPlane) etcdReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if _, err := cp.Etcd.Get(ctx, events.MetaKey); err != nil {
		return fmt.Errorf("etcd: %w", err)
	}
	return nil
}

func (cp *ControlPlane) natsReady(context.Context) error {
	if !cp.NATS.IsConnected() {
		return errors.New("nats: not connected")
	}
	return nil
}

func (cp *ControlPlane) logCheck(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err := cp.LogCheck.Check(ctx)
	return err
}

// awaitLog waits for the log's check to pass with the log caught up
// (LogCheck.WaitCaughtUp), then reports the log ready. While it waits it
// logs why, at most every 5 s.
func (cp *ControlPlane) awaitLog(ctx context.Context, log *slog.Logger, ready func(string, string)) error {
	last := time.Now()
	st, err := cp.LogCheck.WaitCaughtUp(ctx, 20*time.Millisecond, func(err error) {
		if time.Since(last) >= 5*time.Second {
			last = time.Now()
			log.Info("waiting for the log", "reason", err)
		}
	})
	if err != nil {
		return nil // stopped before the log was ready
	}
	who := "here"
	if !st.Local {
		who = st.Leader
	}
	defer close(cp.logReady) // after the line: Start reports the apiserver next
	ready("log", fmt.Sprintf("streams %s and %s, publisher elected on etcd (%s), at revision %d", events.Stream, events.LeaseStream, who, st.Log))
	return nil
}

func (cp *ControlPlane) startEtcd(ctx context.Context, cfg Config, ready func(string, string)) error {
	endpoints := cfg.EtcdEndpoints
	detail := ""
	if len(endpoints) == 0 {
		dir := filepath.Join(cfg.DataDir, "etcd")
		var e *embedded.Etcd
		var err error
		if cfg.Cluster != nil {
			e, err = cp.startClusterEtcd(ctx, cfg)
		} else {
			e, err = embedded.StartEtcd(ctx, embedded.EtcdConfig{Dir: dir, NoFsync: cfg.NoFsync})
		}
		if err != nil {
			return err
		}
		cp.embEtcd = e
		endpoints = []string{e.Endpoint()}
		detail = "embedded, " + dir
	} else {
		detail = fmt.Sprint(endpoints)
	}
	cli, err := newEtcdClient(endpoints)
	if err != nil {
		return err
	}
	cp.Etcd = cli
	// The publisher's election on a connection of its own: its session's
	// keep-alives must not wait behind lists and watches on cp.Etcd's.
	if cp.electionEtcd, err = newEtcdClient(endpoints); err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := cli.Get(cctx, events.MetaKey); err != nil {
		return fmt.Errorf("controlplane: etcd %v: %w", endpoints, err)
	}
	ready("etcd", detail)
	return nil
}

func newEtcdClient(endpoints []string) (*clientv3.Client, error) {
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:          endpoints,
		DialTimeout:        10 * time.Second,
		MaxCallSendMsgSize: embedded.MaxRequestBytes,
		MaxCallRecvMsgSize: 256 << 20,
		Logger:             zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("controlplane: etcd client: %w", err)
	}
	return cli, nil
}

func (cp *ControlPlane) startNATS(ctx context.Context, cfg Config, ready func(string, string)) error {
	var nc *nats.Conn
	var err error
	detail := cfg.NATSURL
	if cfg.NATSURL == "" {
		dir := filepath.Join(cfg.DataDir, "nats")
		ncfg := embedded.NATSConfig{StoreDir: dir, Port: -1}
		if cfg.Cluster != nil {
			if ncfg, err = cp.clusterNATS(ctx, cfg, dir); err != nil {
				return err
			}
		}
		n, err := embedded.StartNATS(ncfg)
		if err != nil {
			return err
		}
		cp.embNATS = n
		if cfg.Cluster != nil {
			if err := awaitMeta(ctx, n); err != nil {
				return err
			}
		}
		nc, err = n.Connect(nats.Name("cairn"))
		if err != nil {
			return err
		}
		detail = "embedded JetStream, " + dir + ", " + n.URL()
	} else {
		nc, err = nats.Connect(cfg.NATSURL, nats.Name("cairn"), nats.MaxReconnects(-1))
		if err != nil {
			return fmt.Errorf("controlplane: nats %s: %w", cfg.NATSURL, err)
		}
	}
	cp.NATS = nc
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("controlplane: jetstream: %w", err)
	}
	cp.JS = js
	ready("nats", detail)
	return nil
}

// EtcdEndpoints are the client URLs of the etcd in use.
func (cp *ControlPlane) EtcdEndpoints() []string { return cp.Etcd.Endpoints() }

// NATSURL is the client URL of the NATS server in use.
func (cp *ControlPlane) NATSURL() string { return cp.NATS.ConnectedUrl() }

// Close stops everything in reverse order and waits.
func (cp *ControlPlane) Close() {
	if cp.group != nil {
		cp.group.Stop()
		_ = cp.group.Wait() // reported by Err while running
	}
	if cp.NATS != nil {
		cp.NATS.Close()
	}
	if cp.embNATS != nil {
		cp.embNATS.Close()
	}
	if cp.Etcd != nil {
		cp.Etcd.Close()
	}
	if cp.electionEtcd != nil {
		cp.electionEtcd.Close()
	}
	if cp.embEtcd != nil {
		cp.embEtcd.Close()
	}
}

// Version is what /version reports.
func Version() apiserver.VersionInfo {
	return apiserver.VersionInfo{
		Major: "1", Minor: "37", GitVersion: "v1.37.2-cairn", GitTreeState: "clean",
		GoVersion: runtime.Version(), Compiler: runtime.Compiler, Platform: runtime.GOOS + "/" + runtime.GOARCH,
	}
}
