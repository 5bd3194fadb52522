package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/events/consumer/shard"
	"github.com/cairn-dev/cairn/services/supervisor"
)

// ErrNotReady is returned by Manager.Ready while a cache has not synced or
// a component is still starting.
var ErrNotReady = errors.New("consumer: not ready")

// ManagerOptions configure a Manager.
type ManagerOptions struct {
	// RestConfig reaches the apiserver as the process's user (the
	// controller manager, the scheduler, a node).
	RestConfig *rest.Config
	// JS reads the log.
	JS jetstream.JetStream
	// UserAgent is sent when RestConfig sets none: the apiserver names the
	// field manager of the process's writes after it.
	UserAgent string
	// Conns is the number of idle connections the shared client keeps to
	// the apiserver; about as many as requests in flight. 0 means 256.
	Conns int
	// Shard, if set, splits keys with the other replicas of Shard.Group;
	// nil owns every key (a single replica).
	Shard *ShardOptions
	Log   *slog.Logger
}

// ShardOptions configure the sharding of a Manager (see package shard).
type ShardOptions struct {
	// Group names the replicas that share keys, e.g. "controller-manager".
	Group string
	// Identity names this replica; default "<hostname>-<pid>".
	Identity string
	// Partitions and LeaseTTL: see shard.Config.
	Partitions int
	LeaseTTL   time.Duration
	// Registerer receives the shard's counters (shard.Config.Registerer).
	Registerer prometheus.Registerer
	// Marker, if set, is the prefix of the Lease (in kube-system, suffixed
	// with the identity) that a catch-up writes: the replica then waits
	// until its caches hold everything committed before the write, so it
	// acts on everything the previous owner wrote. Empty: a catch-up waits
	// only until the caches hold what the log holds.
	Marker string
}

// Manager is the runtime of one consumer process: it owns the REST
// config, the JetStream context and the clients, one cache per resource
// (CacheFor, MetaFor), the controllers (NewController), the event
// recorders and other shared parts (Shared, Add), the shard (Owns, Guard)
// and readiness (Ready, WaitForSync). See the package documentation.
//
// Everything registered is run by Run; what is registered after Run
// started is started at once. All methods are safe for concurrent use.
type Manager struct {
	opts ManagerOptions
	rc   *rest.Config
	log  *slog.Logger

	client  kubernetes.Interface
	dynamic dynamic.Interface
	disco   discovery.DiscoveryInterface
	sharder *shard.Sharder
	catch   *catchUp

	mu      sync.Mutex
	caches  map[cacheKey]*managedCache
	order   []*managedCache
	ctrls   []*Controller
	parts   []namedRunner // Add'ed runners, in order
	shared  map[string]any
	pending map[string]int
	acquire []func(partition int)
	group   *supervisor.Group // non-nil once Run started
	ran     bool
}

type namedRunner struct {
	name string
	r    Runner
}

// NewManager builds a Manager. It does no I/O.
func NewManager(opts ManagerOptions) (*Manager, error) {
	if opts.RestConfig == nil || opts.JS == nil {
		return nil, fmt.Errorf("consumer: new manager: RestConfig and JS are required: %w", ErrConfig)
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.Conns <= 0 {
		opts.Conns = 256
	}
	rc := rest.CopyConfig(opts.RestConfig)
	if rc.UserAgent == "" {
		rc.UserAgent = opts.UserAgent
	}
	m := &Manager{opts: opts, rc: rc, log: opts.Log, caches: map[cacheKey]*managedCache{},
		shared: map[string]any{}, pending: map[string]int{}}
	wrapped := WrapConfig(rc)
	hc, err := httpClientFor(wrapped, opts.Conns)
	if err != nil {
		return nil, err
	}
	if m.client, err = kubernetes.NewForConfigAndClient(wrapped, hc); err != nil {
		return nil, fmt.Errorf("consumer: new manager: %w", err)
	}
	if m.dynamic, err = dynamic.NewForConfigAndClient(wrapped, hc); err != nil {
		return nil, fmt.Errorf("consumer: new manager: %w", err)
	}
	if m.disco, err = discovery.NewDiscoveryClientForConfigAndClient(wrapped, hc); err != nil {
		return nil, fmt.Errorf("consumer: new manager: %w", err)
	}
	if s := opts.Shard; s != nil {
		m.catch = &catchUp{m: m, marker: s.Marker, ttl: s.LeaseTTL}
		m.sharder, err = shard.New(shard.Config{JS: opts.JS, Group: s.Group, Identity: s.Identity,
			Partitions: s.Partitions, LeaseTTL: s.LeaseTTL, Registerer: s.Registerer, Log: opts.Log,
			CatchUp: m.catch.run, OnAcquire: m.onAcquire, OnRelease: func(int) { m.followPartitions() }})
		if err != nil {
			return nil, fmt.Errorf("consumer: new manager: %w", err)
		}
		m.parts = append(m.parts, namedRunner{"shard", m.sharder})
	}
	return m, nil
}

// httpClientFor is the HTTP client of the manager's clients: the one of
// NewClientset, or client-go's own when rc brings its own transport.
func httpClientFor(rc *rest.Config, conns int) (*http.Client, error) {
	if rc.Transport != nil {
		hc, err := rest.HTTPClientFor(rc)
		if err != nil {
			return nil, fmt.Errorf("consumer: http client: %w", err)
		}
		return hc, nil
	}
	return newHTTPClient(rc, conns)
}

// RestConfig is the manager's REST config (with its UserAgent). Do not
// modify it.
func (m *Manager) RestConfig() *rest.Config { return m.rc }

// JS is the manager's JetStream context.
func (m *Manager) JS() jetstream.JetStream { return m.opts.JS }

// Log is the manager's logger.
func (m *Manager) Log() *slog.Logger { return m.log }

// Client is the shared typed clientset. Writes made with a reconcile's
// ctx carry its cause (WrapConfig).
func (m *Manager) Client() kubernetes.Interface { return m.client }

// Dynamic is the shared dynamic client, with the causation of Client.
func (m *Manager) Dynamic() dynamic.Interface { return m.dynamic }

// Discovery is the shared discovery client.
func (m *Manager) Discovery() discovery.DiscoveryInterface { return m.disco }

// Sharder is the manager's shard, nil when it owns every key.
func (m *Manager) Sharder() *shard.Sharder { return m.sharder }

// Owns reports whether this replica handles key; nil (every key) when the
// manager is not sharded. Controllers get it as ControllerConfig.Owns.
func (m *Manager) Owns() func(key string) bool {
	if m.sharder == nil {
		return nil
	}
	return m.sharder.Owns
}

// Guard is the shard's Guard (see ControllerConfig.Guard); nil when the
// manager is not sharded.
func (m *Manager) Guard() func(key string) (done func(), ok bool) {
	if m.sharder == nil {
		return nil
	}
	return m.sharder.Guard
}

// OnAcquire registers f to be called when this replica has caught up on a
// partition it acquired (sharded only), after the controllers' Resync.
func (m *Manager) OnAcquire(f func(partition int)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.acquire = append(m.acquire, f)
}

// Add registers r to run with the manager (Run's contract: block until
// ctx is done, return after every goroutine it started). name is for
// errors and logs.
func (m *Manager) Add(name string, r Runner) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.parts = append(m.parts, namedRunner{name, r})
	if m.group != nil {
		m.group.Go(name, r)
	}
}

// Shared returns the value registered under key, or builds it with build,
// registers it and runs it with the manager: one per process, whoever
// asks first. The event recorders of package eventrecord are shared this
// way (a recorder per component). Asking for a key with another type is
// an ErrConfig.
func Shared[T Runner](m *Manager, key string, build func() (T, error)) (T, error) {
	var zero T
	m.mu.Lock()
	if v, ok := m.shared[key]; ok {
		m.mu.Unlock()
		t, ok := v.(T)
		if !ok {
			return zero, fmt.Errorf("consumer: shared %q is a %T, not a %v: %w", key, v, reflect.TypeFor[T](), ErrConfig)
		}
		return t, nil
	}
	m.mu.Unlock()
	v, err := build()
	if err != nil {
		return zero, err
	}
	m.mu.Lock()
	if prev, ok := m.shared[key]; ok {
		// Built twice at once: keep the first.
		m.mu.Unlock()
		if t, ok := prev.(T); ok {
			return t, nil
		}
		return zero, fmt.Errorf("consumer: shared %q: %w", key, ErrConfig)
	}
	m.shared[key] = v
	m.mu.Unlock()
	m.Add(key, v)
	return v, nil
}

// Starting marks a component as not ready until done is called: a part
// that registers caches from its Run (the garbage collector, after
// discovery) keeps the manager from reporting ready before they exist.
func (m *Manager) Starting(name string) (done func()) {
	m.mu.Lock()
	m.pending[name]++
	m.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			m.mu.Lock()
			if m.pending[name]--; m.pending[name] <= 0 {
				delete(m.pending, name)
			}
			m.mu.Unlock()
		})
	}
}

// NewController builds a controller run by the manager. Owns and Guard
// default to the manager's shard, Log to the manager's logger.
func (m *Manager) NewController(cfg ControllerConfig) (*Controller, error) {
	if cfg.Owns == nil && cfg.Guard == nil {
		cfg.Owns, cfg.Guard = m.Owns(), m.Guard()
	}
	if cfg.Log == nil {
		cfg.Log = m.log
	}
	c, err := NewController(cfg)
	if err != nil {
		return nil, err
	}
	m.AddController(c)
	return c, nil
}

// AddController registers a controller built with NewController (with
// Owns and Guard of its own) to run with the manager: Resync reaches it.
func (m *Manager) AddController(c *Controller) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ctrls = append(m.ctrls, c)
	if m.group != nil {
		m.group.Go(c.cfg.Name, c)
	}
}

// Controllers names the controllers registered, in order.
func (m *Manager) Controllers() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]string, len(m.ctrls))
	for i, c := range m.ctrls {
		out[i] = c.cfg.Name
	}
	return out
}

// Run runs every cache, controller and part registered (and those
// registered later) until ctx is done or one of them fails; then it
// cancels the others and returns, after all of them returned, nil or the
// first error. A Manager runs once.
func (m *Manager) Run(ctx context.Context) error {
	m.mu.Lock()
	if m.ran {
		m.mu.Unlock()
		return fmt.Errorf("consumer: manager: %w", ErrRunning)
	}
	m.ran = true
	g := supervisor.NewGroup(ctx)
	m.group = g
	for _, c := range m.order {
		g.Go("cache "+c.c.Resource().String(), c.c)
	}
	for _, c := range m.ctrls {
		g.Go(c.cfg.Name, c)
	}
	for _, p := range m.parts {
		g.Go(p.name, p.r)
	}
	m.mu.Unlock()
	return g.Wait()
}

// Ready reports whether the manager is running and every cache registered
// has synced (and no component is Starting): nil, or an error matching
// ErrNotReady that names what is missing. It is the readiness check
// (/readyz) of a consumer process.
func (m *Manager) Ready() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.group == nil {
		return fmt.Errorf("consumer: manager not running: %w", ErrNotReady)
	}
	var missing []string
	for name := range m.pending {
		missing = append(missing, name+" starting")
	}
	for _, c := range m.order {
		if !c.c.HasSynced() {
			missing = append(missing, c.c.Resource().String()+" not synced")
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return fmt.Errorf("consumer: %v: %w", missing, ErrNotReady)
	}
	return nil
}

// WaitForSync returns once Ready holds and every cache holds what the log
// held when it was called (WaitForLog), or ctx's error: changes made after
// it returns reach the controllers as events, with their causes, and not
// as part of a first snapshot, which has none. Run must be running.
func (m *Manager) WaitForSync(ctx context.Context) error {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		err := m.Ready()
		if err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("consumer: wait for sync: %w (%w)", ctx.Err(), err)
		case <-t.C:
		}
	}
	return m.WaitForLog(ctx)
}

// WaitForLog waits until every cache registered has applied everything on
// the log now (Cache.WaitForLog). A replica calls it before acting on keys
// taken over from another.
func (m *Manager) WaitForLog(ctx context.Context) error {
	m.mu.Lock()
	cs := slices.Clone(m.order)
	m.mu.Unlock()
	for _, c := range cs {
		if err := c.c.WaitForLog(ctx); err != nil {
			return err
		}
	}
	return nil
}

// Resync queues, with cause, every key of every controller's resync
// sources (see For and ResyncFrom); Owns drops those of other replicas.
func (m *Manager) Resync(cause *events.Event) {
	m.mu.Lock()
	cs := slices.Clone(m.ctrls)
	m.mu.Unlock()
	for _, c := range cs {
		c.Resync(cause)
	}
}

func (m *Manager) onAcquire(p int) {
	m.Resync(m.catch.cause())
	m.mu.Lock()
	fs := slices.Clone(m.acquire)
	m.mu.Unlock()
	for _, f := range fs {
		f(p)
	}
}
