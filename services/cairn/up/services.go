package up

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	history "github.com/cairn-dev/cairn/projections/history/service"
	"github.com/cairn-dev/cairn/services/apiserver"
	"github.com/cairn-dev/cairn/services/apiserver/kubeconfig"
	"github.com/cairn-dev/cairn/services/controllers/manager"
	"github.com/cairn-dev/cairn/services/controlplane"
	"github.com/cairn-dev/cairn/services/csi/hostpath"
	"github.com/cairn-dev/cairn/services/embedded/endpoints"
	"github.com/cairn-dev/cairn/services/pki"
	"github.com/cairn-dev/cairn/services/pki/jointoken"
	"github.com/cairn-dev/cairn/services/scheduler"
	"github.com/cairn-dev/cairn/services/supervisor"
)

// services returns the services `cairn up` runs, in start order: each one
// starts after the one before it is ready and stops before it. Later
// services (controllers, scheduler, kubelet) hold a pointer to the control
// plane service and use its clients from their Run.
func services(cfg Config, paths Paths, p *pki.PKI, id string, log *slog.Logger, rep *Reporter) []supervisor.Service {
	cp := &controlPlaneService{cfg: cfg, paths: paths, pki: p, id: id, log: log, rep: rep}
	cm := &controllerManagerService{cp: cp}
	sched := &schedulerService{cp: cp}
	svcs := []supervisor.Service{cp}
	name := cfg.NodeName
	if name == "" {
		name = nodeName()
	}
	if cfg.Node {
		// The node's CSI driver before the controller-manager, which acts
		// as its provisioner and attacher.
		svcs = append(svcs, &csiDriverService{cp: cp, node: name})
		cm.csi = map[string]string{hostpath.DriverName: "unix://" + CSISocket(paths.Root)}
	}
	svcs = append(svcs, cm, sched, &clusterDNSService{cp: cp})
	if cfg.Node {
		svcs = append(svcs, &nodeService{cp: cp, name: name})
	}
	return svcs
}

// SchedulerKubeconfig is the kubeconfig (user system:kube-scheduler) that
// `cairn up` writes for schedulers; `cairn scheduler --data-dir` uses it.
const SchedulerKubeconfig = "scheduler.kubeconfig"

// schedulerService runs one scheduler replica in process; more can run
// next to it (cairn scheduler): they bind optimistically.
type schedulerService struct {
	cp *controlPlaneService
	s  *scheduler.Scheduler
}

func (s *schedulerService) Name() string { return "scheduler" }

func (s *schedulerService) Describe() string { return scheduler.DefaultSchedulerName }

func (s *schedulerService) Run(ctx context.Context, ready func()) error {
	rc, err := s.cp.clientConfig(apiserver.UserScheduler, nil, SchedulerKubeconfig)
	if err != nil {
		return err
	}
	sched, err := scheduler.New(scheduler.Config{RestConfig: rc, JS: s.cp.cp.JS, Log: s.cp.log.With("service", "scheduler")})
	if err != nil {
		return err
	}
	s.s = sched
	ready()
	return sched.Run(ctx)
}

// clientConfig issues a client certificate for user (in groups), writes a
// kubeconfig with it into the data directory as file, and returns its
// rest.Config (no client-side rate limit: services are trusted).
func (s *controlPlaneService) clientConfig(user string, groups []string, file string) (*rest.Config, error) {
	cert, key, err := s.pki.IssueClient(user, groups)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(s.paths.Root, file)
	if err := kubeconfig.Write(path, "https://"+s.cp.Addr, s.pki.CAPEM, cert, key, user); err != nil {
		return nil, err
	}
	rc, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, err
	}
	rc.QPS, rc.Burst = -1, -1
	return rc, nil
}

// ControllerManagerKubeconfig is the kubeconfig (user
// system:kube-controller-manager) that `cairn up` writes for the
// controller-manager; `cairn controller-manager --data-dir` uses it.
const ControllerManagerKubeconfig = "controller-manager.kubeconfig"

// controllerManagerService runs one controller-manager replica in process,
// sharded like any other so more replicas can join (cairn
// controller-manager).
type controllerManagerService struct {
	cp *controlPlaneService
	m  *manager.Manager
	// csi are the CSI drivers' controller sockets (--csi-endpoint).
	csi map[string]string
}

func (s *controllerManagerService) Name() string { return "controller-manager" }

func (s *controllerManagerService) Describe() string {
	if s.m == nil {
		return ""
	}
	return strings.Join(s.m.Controllers(), ", ")
}

func (s *controllerManagerService) Run(ctx context.Context, ready func()) error {
	cp := s.cp.cp
	rc, err := s.cp.clientConfig(apiserver.UserControllers, nil, ControllerManagerKubeconfig)
	if err != nil {
		return err
	}
	m, err := manager.New(manager.Config{RestConfig: rc, JS: cp.JS, Shard: true, ServiceAccountKeyDir: s.cp.paths.PKI,
		ClusterSigningDir: s.cp.paths.PKI, CSIEndpoints: s.csi, Metrics: cp.Metrics,
		// The server's identity, stable across restarts: a restarted server
		// takes its own partitions over at once (see package shard).
		Identity: s.cp.id, Log: s.cp.log.With("service", "controller-manager")})
	if err != nil {
		return err
	}
	s.m = m
	// Ready once the caches are synced: what users create from then on
	// reaches the controllers as events, with the causes the timeline
	// links.
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- m.Run(runCtx) }()
	synced := make(chan error, 1)
	go func() { synced <- m.WaitForSync(runCtx) }()
	select {
	case err := <-errc:
		return err
	case err := <-synced:
		if err != nil {
			cancel()
			runErr := <-errc
			if runErr != nil || ctx.Err() != nil {
				return runErr // stopped while syncing: not a failure
			}
			return err
		}
	}
	ready()
	return <-errc
}

// controlPlaneService runs etcd, NATS, the log publisher, the watch hub and
// the apiserver (package controlplane), reporting each as it is ready.
type controlPlaneService struct {
	cfg   Config
	paths Paths
	pki   *pki.PKI
	id    string // the server's identity (ServerID)
	log   *slog.Logger
	rep   *Reporter

	cp *controlplane.ControlPlane
}

// controlPlaneName is the control plane's service name; its parts report
// themselves, so it has no ready line of its own.
const controlPlaneName = "control plane"

func (s *controlPlaneService) Name() string { return controlPlaneName }

func (s *controlPlaneService) Describe() string {
	if s.cp == nil {
		return ""
	}
	return "https://" + s.cp.Addr
}

func (s *controlPlaneService) Run(ctx context.Context, ready func()) error {
	cp, err := controlplane.Start(ctx, controlplane.Config{
		DataDir:        s.paths.Root,
		HistoryPath:    s.paths.History,
		RebuildHistory: s.cfg.RebuildHistory,
		EtcdEndpoints:  s.cfg.EtcdEndpoints,
		NATSURL:        s.cfg.NATSURL,
		Listen:         s.cfg.Listen,
		TLS:            s.pki.ServerTLSConfig(),
		// The Service network (cairn up's --service-* and
		// --advertise-address flags).
		ServiceClusterIPRange: s.cfg.ServiceClusterIPRange,
		ServiceNodePortRange:  s.cfg.ServiceNodePortRange,
		AdvertiseAddress:      s.cfg.AdvertiseAddress,
		// Kubelets (ours and cairn kubelet's) trust the cluster CA and let
		// the apiserver's kubelet client (system:masters) read logs and exec.
		KubeletClientTLS: s.pki.KubeletClientTLSConfig(),
		Authenticator:    apiserver.X509Authenticator{},
		ClusterCA:        s.pki.CAPEM,
		// Pods get their ServiceAccount's token volume; the
		// controller-manager's serviceaccount controller makes every
		// namespace's default ServiceAccount and kube-root-ca.crt.
		ServiceAccountKeyDir:    s.paths.PKI,
		ServiceAccountAdmission: true,
		ServiceAccountIssuer:    s.cfg.ServiceAccountIssuer,
		APIAudiences:            s.cfg.APIAudiences,
		MaxTokenExpiration:      s.cfg.MaxTokenExpiration,
		RequestTimeout:          s.cfg.RequestTimeout,
		LogBackpressure:         s.cfg.LogBackpressure,
		DisableProfiling:        s.cfg.DisableProfiling,
		PriorityAndFairness:     s.cfg.PriorityAndFairness,
		MaxRequestsInFlight:     s.cfg.MaxRequestsInFlight,
		// Kubelets read only what their pods use (Node,RBAC).
		NodeAuthorizer: true,
		Identity:       s.id,
		NodeNetNS:      embeddedNodeNetNS(s.cfg, s.paths),
		Cluster:        s.cfg.cluster,
		OnReady:        s.rep.Ready,
		Log:            s.log,
	})
	if err != nil {
		return err
	}
	s.cp = cp
	defer cp.Close()
	s.rep.Ready("history", fmt.Sprintf("https://%s%s: timelines, audit and the page; in a browser: kubectl proxy, then http://127.0.0.1:8001%s",
		cp.Addr, history.Prefix, history.Prefix))
	epPath := endpoints.Path(s.paths.Root)
	if err := endpoints.Write(epPath, endpoints.Set{Etcd: cp.EtcdEndpoints(), NATS: cp.NATSURL(), APIServer: "https://" + cp.Addr}); err != nil {
		return err
	}
	defer os.Remove(epPath)
	if s.cfg.cluster != nil {
		tok, err := ensureServerToken(ctx, s.paths, s.pki.CAPEM)
		if err != nil {
			return err
		}
		s.rep.Ready("cluster", fmt.Sprintf("server %s; others join with: cairn up --join https://%s --join-token %s (also in %s)",
			s.cfg.cluster.Name, cp.Addr, tok, filepath.Join(s.paths.Root, jointoken.FileName)))
	}
	ready()
	select {
	case <-ctx.Done():
		return nil
	case err := <-cp.Err():
		return err
	}
}
