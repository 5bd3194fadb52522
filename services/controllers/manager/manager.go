package manager

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"

	"github.com/cairn-dev/cairn/events/consumer"
	"github.com/cairn-dev/cairn/services/controllers/certificates"
	"github.com/cairn-dev/cairn/services/controllers/cronjob"
	"github.com/cairn-dev/cairn/services/controllers/csiattacher"
	"github.com/cairn-dev/cairn/services/controllers/csiprovisioner"
	"github.com/cairn-dev/cairn/services/controllers/csiresizer"
	"github.com/cairn-dev/cairn/services/controllers/daemonset"
	"github.com/cairn-dev/cairn/services/controllers/deployment"
	"github.com/cairn-dev/cairn/services/controllers/disruption"
	"github.com/cairn-dev/cairn/services/controllers/endpoint"
	"github.com/cairn-dev/cairn/services/controllers/endpointmirror"
	"github.com/cairn-dev/cairn/services/controllers/ephemeral"
	"github.com/cairn-dev/cairn/services/controllers/gc"
	"github.com/cairn-dev/cairn/services/controllers/job"
	"github.com/cairn-dev/cairn/services/controllers/namespace"
	"github.com/cairn-dev/cairn/services/controllers/nodeipam"
	"github.com/cairn-dev/cairn/services/controllers/nodelifecycle"
	"github.com/cairn-dev/cairn/services/controllers/persistentvolume"
	"github.com/cairn-dev/cairn/services/controllers/policystatus"
	"github.com/cairn-dev/cairn/services/controllers/pvcprotection"
	"github.com/cairn-dev/cairn/services/controllers/pvprotection"
	"github.com/cairn-dev/cairn/services/controllers/replicaset"
	"github.com/cairn-dev/cairn/services/controllers/serviceaccount"
	"github.com/cairn-dev/cairn/services/controllers/statefulset"
	"github.com/cairn-dev/cairn/services/controllers/ttlafterfinished"
)

// UserAgent is what the controllers send as User-Agent unless
// Config.RestConfig sets one: the apiserver names their field manager
// after it, as kube's "kube-controller-manager".
const UserAgent = "cairn-controller-manager"

// Marker is the prefix of a replica's catch-up Lease in kube-system
// (consumer.ShardOptions.Marker).
const Marker = "cairn-controller-manager-"

// Config configures a controller-manager replica.
type Config struct {
	// RestConfig authenticates as the controller manager.
	RestConfig *rest.Config
	JS         jetstream.JetStream
	// Identity names this replica; default hostname-pid.
	Identity string
	// Shard splits keys with the other replicas; false handles every key
	// (a single replica).
	Shard bool
	// Partitions and LeaseTTL tune sharding (see package shard); LeaseTTL
	// 0 is shard.DefaultLeaseTTL.
	Partitions int
	LeaseTTL   time.Duration
	// Metrics receives the shard's counters; nil registers none.
	Metrics prometheus.Registerer
	// Workers per controller; default 4.
	Workers int
	// ClusterCIDR is split into the nodes' pod CIDRs; default
	// nodeipam.DefaultClusterCIDR.
	ClusterCIDR string
	// NodeMonitorGracePeriod is how long a node may go unheard before the
	// node lifecycle controller marks it unknown and taints it; default
	// nodelifecycle.DefaultGracePeriod.
	NodeMonitorGracePeriod time.Duration
	// MaxEndpointsPerSlice is --max-endpoints-per-slice; default
	// endpoint.DefaultMaxEndpointsPerSlice.
	MaxEndpointsPerSlice int32
	// ClusterSigningDir holds the cluster CA that signs approved
	// CertificateSigningRequests (package certificates); empty runs no
	// signer.
	ClusterSigningDir string
	// ClusterSigningDuration is the longest certificate signed
	// (--cluster-signing-duration); 0 means a year.
	ClusterSigningDuration time.Duration
	// ServiceAccountKeyDir holds the service-account signing key that
	// signs legacy token Secrets (--service-account-private-key-file).
	ServiceAccountKeyDir string
	// CSIEndpoints are the CSI drivers' controller services, driver name
	// -> unix:///path (--csi-endpoint NAME=unix:///path): the provisioner
	// and attacher act for these drivers only.
	CSIEndpoints map[string]string
	Log          *slog.Logger
}

// controller is one entry of Controllers: its name and how to build it on
// the replica's consumer.Manager.
type controller struct {
	name string
	new  func(m *consumer.Manager, c Config) error
}

// mgr is the consumer.Manager, for short lines in Controllers.
type mgr = *consumer.Manager

// Controllers are the controllers a replica runs, in order. Adding one is
// one line here; `cairn up` and `cairn controller-manager` both run this
// list. Typed caches are shared by resource, so a controller asking for
// pods gets the pod cache the others use; the garbage collector comes
// after the controllers whose typed caches it reads.
var Controllers = []controller{
	{"replicaset", func(m mgr, c Config) error { return ok(replicaset.New(m, replicaset.Options{Workers: c.Workers})) }},
	{"deployment", func(m mgr, c Config) error { return ok(deployment.New(m, deployment.Options{Workers: c.Workers})) }},
	{"daemonset", func(m mgr, c Config) error { return ok(daemonset.New(m, daemonset.Options{Workers: c.Workers})) }},
	{"garbagecollector", func(m mgr, c Config) error { return ok(gc.New(m, gc.Options{Workers: c.Workers})) }},
	{"namespace", func(m mgr, c Config) error { return ok(namespace.New(m, namespace.Options{Workers: c.Workers})) }},
	{"nodeipam", func(m mgr, c Config) error { return ok(nodeipam.New(m, nodeipam.Options{ClusterCIDR: c.ClusterCIDR})) }},
	{"disruption", func(m mgr, c Config) error { return ok(disruption.New(m, disruption.Options{})) }},
	{"endpointslice", func(m mgr, c Config) error {
		return ok(endpoint.NewSlices(m, endpoint.SliceOptions{Workers: c.Workers, MaxEndpointsPerSlice: c.MaxEndpointsPerSlice}))
	}},
	{"endpoints", func(m mgr, c Config) error {
		return ok(endpoint.NewEndpoints(m, endpoint.EndpointsOptions{Workers: c.Workers}))
	}},
	{"endpointslicemirroring", func(m mgr, c Config) error {
		return ok(endpointmirror.New(m, endpointmirror.Options{Workers: c.Workers}))
	}},
	{"job", func(m mgr, c Config) error { return ok(job.New(m, job.Options{Workers: c.Workers})) }},
	{"ttlafterfinished", func(m mgr, c Config) error {
		return ok(ttlafterfinished.New(m, ttlafterfinished.Options{Workers: c.Workers}))
	}},
	{"statefulset", func(m mgr, c Config) error { return ok(statefulset.New(m, statefulset.Options{Workers: c.Workers})) }},
	{"cronjob", func(m mgr, c Config) error { return ok(cronjob.New(m, cronjob.Options{Workers: c.Workers})) }},
	{"serviceaccount", func(m mgr, c Config) error {
		return ok(serviceaccount.New(m, serviceaccount.Options{Workers: c.Workers, KeyDir: c.ServiceAccountKeyDir}))
	}},
	{"pvc-protection", func(m mgr, c Config) error {
		return ok(pvcprotection.New(m, pvcprotection.Options{Workers: c.Workers}))
	}},
	{"ephemeral-volume", func(m mgr, c Config) error { return ok(ephemeral.New(m, ephemeral.Options{Workers: c.Workers})) }},
	{"pv-protection", func(m mgr, c Config) error { return ok(pvprotection.New(m, pvprotection.Options{})) }},
	{"csrapproving", func(m mgr, c Config) error { return ok(certificates.NewApprover(m)) }},
	{"csrsigning", func(m mgr, c Config) error {
		return whenSet(c.ClusterSigningDir, certificates.NewSigner, m, certificates.SignerOptions{CADir: c.ClusterSigningDir, Duration: c.ClusterSigningDuration})
	}},
	{"nodelifecycle", func(m mgr, c Config) error {
		return ok(nodelifecycle.New(m, nodelifecycle.Options{GracePeriod: c.NodeMonitorGracePeriod}))
	}},
	{"persistentvolume-binder", func(m mgr, c Config) error {
		return ok(persistentvolume.New(m, persistentvolume.Options{Workers: c.Workers}))
	}},
	{"csi-provisioner", func(m mgr, c Config) error {
		return ok(csiprovisioner.New(m, csiprovisioner.Options{Endpoints: c.CSIEndpoints, Workers: c.Workers}))
	}},
	{"csi-resizer", func(m mgr, c Config) error {
		return ok(csiresizer.New(m, csiresizer.Options{Endpoints: c.CSIEndpoints, Workers: c.Workers}))
	}},
	{"attachdetach", func(m mgr, c Config) error {
		return ok(csiattacher.New(m, csiattacher.Options{Endpoints: c.CSIEndpoints, Workers: c.Workers}))
	}},
	{"validatingadmissionpolicy-status", func(m mgr, c Config) error { return ok(policystatus.New(m, policystatus.Options{})) }},
}

// whenSet builds the controller only when dir is set.
func whenSet[O, T any](dir string, f func(mgr, O) (T, error), m mgr, o O) error {
	if dir == "" {
		return nil
	}
	return ok(f(m, o))
}

// ok drops the controller New returned: the manager runs it.
func ok[T any](_ T, err error) error { return err }

// Manager is a controller-manager replica: the controllers on one
// consumer.Manager.
type Manager struct {
	*consumer.Manager
	names []string
}

// New builds the controllers.
func New(cfg Config) (*Manager, error) {
	if cfg.RestConfig == nil || cfg.JS == nil {
		return nil, errors.New("manager: RestConfig and JS are required")
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 4
	}
	opts := consumer.ManagerOptions{RestConfig: cfg.RestConfig, JS: cfg.JS, UserAgent: UserAgent, Log: cfg.Log}
	if cfg.Shard {
		opts.Shard = &consumer.ShardOptions{Group: "controller-manager", Identity: cfg.Identity,
			Partitions: cfg.Partitions, LeaseTTL: cfg.LeaseTTL, Marker: Marker, Registerer: cfg.Metrics}
	}
	cm, err := consumer.NewManager(opts)
	if err != nil {
		return nil, fmt.Errorf("manager: %w", err)
	}
	m := &Manager{Manager: cm}
	for _, c := range Controllers {
		if err := c.new(cm, cfg); err != nil {
			return nil, fmt.Errorf("manager: %s: %w", c.name, err)
		}
		m.names = append(m.names, c.name)
	}
	return m, nil
}

// Controllers names the controllers this manager runs.
func (m *Manager) Controllers() []string { return m.names }

// PodCacheStats are the counters of the pod cache the controllers share:
// with Shard, it receives only the pods of this replica's partitions.
func (m *Manager) PodCacheStats() consumer.CacheStats {
	pods, err := consumer.CacheFor[*corev1.Pod](m.Manager, corev1.SchemeGroupVersion.WithResource("pods"), consumer.Partitioned())
	if err != nil {
		return consumer.CacheStats{}
	}
	return pods.Stats()
}

var _ interface {
	Run(ctx context.Context) error
	WaitForSync(ctx context.Context) error
} = (*Manager)(nil)
