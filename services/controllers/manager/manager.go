package manager

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/events/consumer"
	"github.com/cairn-dev/cairn/events/consumer/shard"
	"github.com/cairn-dev/cairn/services/controllers/deployment"
	"github.com/cairn-dev/cairn/services/controllers/disruption"
	"github.com/cairn-dev/cairn/services/controllers/gc"
	"github.com/cairn-dev/cairn/services/controllers/namespace"
	"github.com/cairn-dev/cairn/services/controllers/nodeipam"
	"github.com/cairn-dev/cairn/services/controllers/nodelifecycle"
	"github.com/cairn-dev/cairn/services/controllers/replicaset"
)

// UserAgent is what the controllers send as User-Agent unless
// Config.RestConfig sets one: the apiserver names their field manager
// after it, as kube's "kube-controller-manager".
const UserAgent = "cairn-controller-manager"

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
	// Partitions and LeaseTTL tune sharding (see package shard).
	Partitions int
	LeaseTTL   time.Duration
	// Workers per controller; default 4.
	Workers int
	// ClusterCIDR is split into the nodes' pod CIDRs; default
	// nodeipam.DefaultClusterCIDR.
	ClusterCIDR string
	// NodeMonitorGracePeriod is how long a node may go unheard before the
	// node lifecycle controller marks it unknown and taints it; default
	// nodelifecycle.DefaultGracePeriod.
	NodeMonitorGracePeriod time.Duration
	Log                    *slog.Logger
}

// Manager is a running set of controllers.
type Manager struct {
	cfg     Config
	sharder *shard.Sharder
	ctrls   []consumer.Runner
	// pods, rsets and deps are shared by the controllers (see New).
	pods   *consumer.Cache[*corev1.Pod]
	rsets  *consumer.Cache[*appsv1.ReplicaSet]
	deps   *consumer.Cache[*appsv1.Deployment]
	names  []string
	client kubernetes.Interface
	log    *slog.Logger

	// catchMu serialises catch-ups; caughtUpFrom is when the last
	// completed one started: it covers every partition acquired before.
	catchMu      sync.Mutex
	caughtUpFrom time.Time
	// takeover is the event of the marker write of the last catch-up: the
	// cause of the reconciles a takeover queues.
	takeover atomic.Pointer[events.Event]
	// followMu orders followPartitions calls.
	followMu sync.Mutex
}

type waitForLog interface {
	WaitForLog(ctx context.Context) error
}

type resyncer interface{ Resync(cause *events.Event) }

// New builds the controllers.
func New(cfg Config) (*Manager, error) {
	if cfg.RestConfig == nil || cfg.JS == nil {
		return nil, errors.New("manager: RestConfig and JS are required")
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 4
	}
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = 6 * time.Second
	}
	if cfg.RestConfig.UserAgent == "" {
		// The field manager of the controllers' writes (managedFields).
		cfg.RestConfig = rest.CopyConfig(cfg.RestConfig)
		cfg.RestConfig.UserAgent = UserAgent
	}
	m := &Manager{cfg: cfg, log: cfg.Log}
	cs, err := kubernetes.NewForConfig(cfg.RestConfig)
	if err != nil {
		return nil, fmt.Errorf("manager: client: %w", err)
	}
	m.client = cs
	var owns func(string) bool
	var guard func(string) (func(), bool)
	if cfg.Shard {
		s, err := shard.New(shard.Config{JS: cfg.JS, Group: "controller-manager", Identity: cfg.Identity,
			Partitions: cfg.Partitions, LeaseTTL: cfg.LeaseTTL, Log: cfg.Log,
			CatchUp: m.catchUp, OnAcquire: m.onAcquire, OnRelease: func(int) { m.followPartitions() }})
		if err != nil {
			return nil, err
		}
		m.sharder = s
		owns, guard = s.Owns, s.Guard
	}
	add := func(name string, r consumer.Runner, err error) error {
		if err != nil {
			return fmt.Errorf("manager: %s: %w", name, err)
		}
		m.ctrls = append(m.ctrls, r)
		m.names = append(m.names, name)
		return nil
	}
	log := cfg.Log
	// The pod, ReplicaSet and Deployment caches are shared by the
	// replicaset and deployment controllers and the garbage collector:
	// each event is delivered and decoded once.
	podIndexers := gc.OwnerIndexers[*corev1.Pod]()
	maps.Copy(podIndexers, replicaset.PodIndexers())
	if m.pods, err = consumer.NewCache(consumer.CacheConfig[*corev1.Pod]{
		Resource: corev1.SchemeGroupVersion.WithResource("pods"), Config: cfg.RestConfig, JS: cfg.JS, Log: log,
		Indexers: podIndexers,
	}); err != nil {
		return nil, fmt.Errorf("manager: pod cache: %w", err)
	}
	if m.sharder != nil {
		// Until it holds partitions, a replica follows only the pods
		// without a controller.
		m.pods.SetPartitions([]int{})
	}
	if m.rsets, err = consumer.NewCache(consumer.CacheConfig[*appsv1.ReplicaSet]{
		Resource: appsv1.SchemeGroupVersion.WithResource("replicasets"), Config: cfg.RestConfig, JS: cfg.JS, Log: log,
		Indexers: gc.OwnerIndexers[*appsv1.ReplicaSet](),
	}); err != nil {
		return nil, fmt.Errorf("manager: replicaset cache: %w", err)
	}
	if m.deps, err = consumer.NewCache(consumer.CacheConfig[*appsv1.Deployment]{
		Resource: appsv1.SchemeGroupVersion.WithResource("deployments"), Config: cfg.RestConfig, JS: cfg.JS, Log: log,
		Indexers: gc.OwnerIndexers[*appsv1.Deployment](),
	}); err != nil {
		return nil, fmt.Errorf("manager: deployment cache: %w", err)
	}
	rs, err := replicaset.New(replicaset.Config{RestConfig: cfg.RestConfig, JS: cfg.JS, Workers: cfg.Workers, Owns: owns, Guard: guard, Log: log,
		Pods: m.pods, ReplicaSets: m.rsets})
	if err := add("replicaset", rs, err); err != nil {
		return nil, err
	}
	dep, err := deployment.New(deployment.Config{RestConfig: cfg.RestConfig, JS: cfg.JS, Workers: cfg.Workers, Owns: owns, Guard: guard, Log: log,
		Pods: m.pods, ReplicaSets: m.rsets, Deployments: m.deps})
	if err := add("deployment", dep, err); err != nil {
		return nil, err
	}
	g, err := gc.New(gc.Config{RestConfig: cfg.RestConfig, JS: cfg.JS, Workers: cfg.Workers, Owns: owns, Guard: guard, Log: log,
		Shared: []consumer.MetaCache{consumer.Meta(m.pods), consumer.Meta(m.rsets), consumer.Meta(m.deps)}})
	if err := add("garbagecollector", g, err); err != nil {
		return nil, err
	}
	ns, err := namespace.New(namespace.Config{RestConfig: cfg.RestConfig, JS: cfg.JS, Workers: cfg.Workers, Owns: owns, Guard: guard, Log: log})
	if err := add("namespace", ns, err); err != nil {
		return nil, err
	}
	ipam, err := nodeipam.New(nodeipam.Config{RestConfig: cfg.RestConfig, JS: cfg.JS, ClusterCIDR: cfg.ClusterCIDR, Owns: owns, Guard: guard, Log: log})
	if err := add("nodeipam", ipam, err); err != nil {
		return nil, err
	}
	dis, err := disruption.New(disruption.Config{RestConfig: cfg.RestConfig, JS: cfg.JS, Owns: owns, Guard: guard, Log: log,
		Pods: m.pods, ReplicaSets: m.rsets, Deployments: m.deps})
	if err := add("disruption", dis, err); err != nil {
		return nil, err
	}
	life, err := nodelifecycle.New(nodelifecycle.Config{RestConfig: cfg.RestConfig, JS: cfg.JS, GracePeriod: cfg.NodeMonitorGracePeriod,
		Owns: owns, Guard: guard, Log: log})
	if err := add("nodelifecycle", life, err); err != nil {
		return nil, err
	}
	return m, nil
}

// PodCacheStats are the counters of the pod cache the controllers share:
// with Shard, it receives only the pods of this replica's partitions.
func (m *Manager) PodCacheStats() consumer.CacheStats { return m.pods.Stats() }

// Controllers names the controllers this manager runs.
func (m *Manager) Controllers() []string { return m.names }

// Run runs every controller (and the sharder) until ctx is done.
func (m *Manager) Run(ctx context.Context) error {
	runners := append([]consumer.Runner{m.pods, m.rsets, m.deps}, m.ctrls...)
	if m.sharder != nil {
		runners = append(runners, m.sharder)
	}
	return consumer.RunAll(ctx, runners...)
}

// WaitForSync returns once every controller's caches hold the cluster as
// the log had it when WaitForSync was called (or ctx's error): changes
// made after that reach the controllers as events, with their causes, and
// not as part of a cache's first snapshot, which has none. Run must be
// running.
func (m *Manager) WaitForSync(ctx context.Context) error {
	for _, c := range m.ctrls {
		if w, ok := c.(waitForLog); ok {
			if err := w.WaitForLog(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

// catchUp makes sure this replica has seen everything committed before it
// took a partition: its marker write is ordered after all of it on the log.
func (m *Manager) catchUp(ctx context.Context) error {
	asked := time.Now()
	m.catchMu.Lock()
	defer m.catchMu.Unlock()
	if !m.caughtUpFrom.Before(asked) {
		return nil
	}
	started := time.Now()
	if err := m.doCatchUp(ctx); err != nil {
		return err
	}
	m.caughtUpFrom = started
	return nil
}

func (m *Manager) doCatchUp(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	m.followPartitions()
	rev, err := m.mark(ctx)
	if err != nil {
		return err
	}
	if err := events.WaitPublished(ctx, m.cfg.JS, rev); err != nil {
		return err
	}
	if ev, err := m.markerEvent(ctx, rev); err != nil {
		m.log.Warn("manager: takeover event not found; reconciles it queues have no cause", "err", err)
	} else {
		m.takeover.Store(ev)
	}
	return m.WaitForSync(ctx)
}

// mark writes this replica's Lease and returns the revision of the write.
func (m *Manager) mark(ctx context.Context) (events.Revision, error) {
	leases := m.client.CoordinationV1().Leases("kube-system")
	name := m.markerName()
	now := metav1.NewMicroTime(time.Now())
	holder := m.sharder.Identity()
	secs := int32(m.cfg.LeaseTTL / time.Second)
	l, err := leases.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		l, err = leases.Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-system"},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder, RenewTime: &now, LeaseDurationSeconds: &secs},
		}, metav1.CreateOptions{})
	case err == nil:
		l.Spec.RenewTime = &now
		l.Spec.HolderIdentity = &holder
		l, err = leases.Update(ctx, l, metav1.UpdateOptions{})
	}
	if err != nil {
		return 0, fmt.Errorf("manager: marker lease: %w", err)
	}
	return events.ParseRevision(l.ResourceVersion)
}

// followPartitions points the pod cache at the pods of the ReplicaSets
// (and other controllers) whose keys this replica leases (see
// subjectPartitions). The other replicas' pods are not even sent to it.
func (m *Manager) followPartitions() {
	m.followMu.Lock()
	defer m.followMu.Unlock()
	m.pods.SetPartitions(subjectPartitions(m.sharder.Leased(), m.sharder.Partitions()))
}

// subjectPartitions are the subject partitions (events.Partition) of the
// keys in sharder partitions leased out of n: t such that t % n is
// leased, since both hash keys with events.KeyHash. With an n that does
// not divide events.Partitions they do not line up: nil, every pod.
func subjectPartitions(leased []int, n int) []int {
	if n <= 0 || events.Partitions%n != 0 {
		return nil
	}
	parts := []int{}
	for t := range events.Partitions {
		if slices.Contains(leased, t%n) {
			parts = append(parts, t)
		}
	}
	return parts
}

func (m *Manager) onAcquire(int) {
	cause := m.takeover.Load()
	for _, c := range m.ctrls {
		if r, ok := c.(resyncer); ok {
			r.Resync(cause)
		}
	}
}

// markerEvent reads the event of this replica's marker write at rev from
// the lease stream.
func (m *Manager) markerEvent(ctx context.Context, rev events.Revision) (*events.Event, error) {
	s, err := m.cfg.JS.Stream(ctx, events.LeaseStream)
	if err != nil {
		return nil, err
	}
	subj := events.Filter("coordination.k8s.io", "leases", "", "kube-system", m.markerName())
	msg, err := s.GetLastMsgForSubject(ctx, subj)
	if err != nil {
		return nil, err
	}
	var ev events.Event
	if err := json.Unmarshal(msg.Data, &ev); err != nil {
		return nil, err
	}
	if ev.Revision < rev {
		return nil, fmt.Errorf("manager: marker event at %d, want %d", ev.Revision, rev)
	}
	ev.Object = nil
	return &ev, nil
}

func (m *Manager) markerName() string {
	return "cairn-controller-manager-" + strings.ToLower(strings.ReplaceAll(m.sharder.Identity(), "_", "-"))
}
