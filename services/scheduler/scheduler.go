package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/events/consumer"
	"github.com/cairn-dev/cairn/events/consumer/shard"
	"github.com/cairn-dev/cairn/services/eventrecord"
	fw "github.com/cairn-dev/cairn/services/scheduler/framework"
	"github.com/cairn-dev/cairn/services/scheduler/plugins"
	"github.com/cairn-dev/cairn/services/scheduler/plugins/volumebinding"
	"github.com/cairn-dev/cairn/services/scheduler/queue"
)

// DefaultSchedulerName is the spec.schedulerName of pods the scheduler
// handles unless configured otherwise.
const DefaultSchedulerName = corev1.DefaultSchedulerName

// ErrConfig is returned by New for an incomplete Config.
var ErrConfig = errors.New("scheduler: bad config")

var (
	podsResource     = corev1.SchemeGroupVersion.WithResource("pods")
	nodesResource    = corev1.SchemeGroupVersion.WithResource("nodes")
	priorityResource = schedulingv1.SchemeGroupVersion.WithResource("priorityclasses")
)

// Config configures a scheduler replica.
type Config struct {
	// RestConfig reaches the apiserver as the scheduler
	// (system:kube-scheduler).
	RestConfig *rest.Config
	// JS reads the log.
	JS jetstream.JetStream
	// SchedulerName selects the pods to schedule (spec.schedulerName);
	// empty means "default-scheduler".
	SchedulerName string
	// Workers is the number of bindings and status writes in flight at
	// once; 0 means 256 (a binding waits for an fsync: many in flight let
	// etcd commit them in groups). Scheduling decisions themselves are
	// made one pod at a time, as in kube-scheduler.
	Workers int
	// Parallelism is the number of goroutines filtering and scoring nodes
	// within one decision; 0 means GOMAXPROCS.
	Parallelism int
	// PercentageOfNodesToScore, as kube-scheduler's; 0 is adaptive.
	PercentageOfNodesToScore int32
	// Sharded partitions pods among the replicas that set it (leases in a
	// NATS key-value bucket named after SchedulerName, see package shard);
	// each replica then schedules only the pods it owns. Off, every
	// replica may schedule every pod and the apiserver settles conflicts
	// (optimistic concurrency, the default).
	Sharded bool
	// Identity names this replica (sharding, events); default
	// "<hostname>-<pid>".
	Identity string
	// EventQPS and EventBurst limit the rate of Event writes (see
	// recorder.go): 0 means 50 and 100, as kube-scheduler's client; a
	// negative EventQPS does not limit.
	EventQPS   float32
	EventBurst int
	// InitialBackoff and MaxBackoff bound the retry back-off of pods that
	// did not fit; 0 means 1s and 10s.
	InitialBackoff, MaxBackoff time.Duration
	Log                        *slog.Logger
	// Clock is the time source; nil is time.Now.
	Clock func() time.Time
}

// Options are the settings of a scheduler on a consumer.Manager: Config
// without what the manager owns (REST config, log, sharding).
type Options struct {
	SchedulerName            string
	Workers, Parallelism     int
	PercentageOfNodesToScore int32
	Identity                 string
	EventQPS                 float32
	EventBurst               int
	InitialBackoff           time.Duration
	MaxBackoff               time.Duration
	Clock                    func() time.Time
}

// Scheduler is one scheduler replica. Build it with New (a process of its
// own) or NewScheduler (on a Manager), and start it with Run.
type Scheduler struct {
	cfg    Options
	m      *consumer.Manager
	log    *slog.Logger
	client kubernetes.Interface

	pods     *consumer.Cache[*corev1.Pod]
	nodes    *consumer.Cache[*corev1.Node]
	classes  *consumer.Cache[*schedulingv1.PriorityClass]
	sharder  *shard.Sharder
	cache    *cache
	queue    *queue.Queue
	fw       *fw.Framework
	recorder *recorder
	// volumes are the VolumeBinding plugin's caches.
	volumes *volumebinding.Caches
	work    chan func()
	stats   counters

	mu     sync.Mutex
	causes map[string]consumer.Cause
	// guards are the partition guards held (guards.go); confirms pair
	// bindings with their confirmation on the log (deschedule.go).
	guards   map[string]func()
	confirms map[string]*confirmation

	// violations are bindings of this replica found to break required
	// anti-affinity (see deschedule.go).
	violations chan violation
	// beforeBind, if set (tests), runs before each binding is posted.
	beforeBind func(*corev1.Pod)
}

// New builds a scheduler replica and the consumer.Manager it runs on:
// with Sharded, the manager's shard is the group "scheduler-<name>".
func New(cfg Config) (*Scheduler, error) {
	if cfg.RestConfig == nil || cfg.JS == nil {
		return nil, fmt.Errorf("scheduler: new: RestConfig and JS are required: %w", ErrConfig)
	}
	opts := Options{SchedulerName: cfg.SchedulerName, Workers: cfg.Workers, Parallelism: cfg.Parallelism,
		PercentageOfNodesToScore: cfg.PercentageOfNodesToScore, Identity: cfg.Identity, EventQPS: cfg.EventQPS,
		EventBurst: cfg.EventBurst, InitialBackoff: cfg.InitialBackoff, MaxBackoff: cfg.MaxBackoff, Clock: cfg.Clock}
	opts.defaults()
	rc := rest.CopyConfig(cfg.RestConfig)
	if rc.QPS == 0 {
		rc.QPS, rc.Burst = 5000, 10000
	}
	mo := consumer.ManagerOptions{RestConfig: rc, JS: cfg.JS, Conns: opts.Workers + 4, Log: cfg.Log,
		// The field manager of its writes, as kube's "kube-scheduler".
		UserAgent: "cairn-scheduler"}
	if cfg.Sharded {
		mo.Shard = &consumer.ShardOptions{Group: "scheduler-" + opts.SchedulerName, Identity: opts.Identity}
	}
	m, err := consumer.NewManager(mo)
	if err != nil {
		return nil, fmt.Errorf("scheduler: new: %w", err)
	}
	return NewScheduler(m, opts)
}

func (o *Options) defaults() {
	if o.SchedulerName == "" {
		o.SchedulerName = DefaultSchedulerName
	}
	if o.Workers <= 0 {
		o.Workers = 256
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.Identity == "" {
		host, _ := os.Hostname()
		o.Identity = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	if o.EventQPS == 0 {
		o.EventQPS = eventrecord.DefaultQPS
	}
	if o.EventBurst <= 0 {
		o.EventBurst = eventrecord.DefaultBurst
	}
}

// NewScheduler builds a scheduler on m: its caches (pods, nodes, priority
// classes), its loops and its recorder run with m. With m sharded, it
// schedules only the pods of the partitions m holds.
func NewScheduler(m *consumer.Manager, opts Options) (*Scheduler, error) {
	opts.defaults()
	cfg := opts
	log := m.Log().With("component", "scheduler", "scheduler", cfg.SchedulerName)
	s := &Scheduler{
		cfg: cfg, m: m, log: log, client: m.Client(), cache: newCache(), sharder: m.Sharder(),
		queue:      queue.New(queue.Config{InitialBackoff: cfg.InitialBackoff, MaxBackoff: cfg.MaxBackoff, Clock: cfg.Clock}),
		work:       make(chan func()),
		violations: make(chan violation, violationQueue),
		causes:     map[string]consumer.Cause{},
		guards:     map[string]func(){},
		confirms:   map[string]*confirmation{},
	}
	rec, err := eventrecord.ForManager(m, eventrecord.Config{Component: cfg.SchedulerName, Instance: cfg.Identity, Now: cfg.Clock, Log: log},
		cfg.EventQPS, cfg.EventBurst)
	if err != nil {
		return nil, fmt.Errorf("scheduler: new: %w", err)
	}
	s.recorder = &recorder{client: s.client, now: cfg.Clock, log: log, Recorder: rec}
	if err := s.newCaches(); err != nil {
		return nil, err
	}
	if s.volumes, err = volumebinding.NewCaches(m, s.queue.MoveAllToActiveOrBackoff); err != nil {
		return nil, fmt.Errorf("scheduler: new: %w", err)
	}
	s.fw = fw.New(withVolumeBinding(plugins.Default(), volumebinding.New(s.volumes, s.client, 0)), plugins.DefaultWeights(),
		fw.Options{Parallelism: cfg.Parallelism, PercentageOfNodesToScore: cfg.PercentageOfNodesToScore})
	m.Add("scheduler", consumer.RunnerFunc(s.loop))
	m.Add("deschedule", consumer.RunnerFunc(s.deschedule))
	if s.sharder != nil {
		m.OnAcquire(s.requeuePartition)
	}
	return s, nil
}

func (s *Scheduler) newCaches() error {
	var err error
	if s.pods, err = consumer.CacheFor[*corev1.Pod](s.m, podsResource); err != nil {
		return fmt.Errorf("scheduler: new: %w", err)
	}
	if s.nodes, err = consumer.CacheFor[*corev1.Node](s.m, nodesResource); err != nil {
		return fmt.Errorf("scheduler: new: %w", err)
	}
	if s.classes, err = consumer.CacheFor[*schedulingv1.PriorityClass](s.m, priorityResource); err != nil {
		return fmt.Errorf("scheduler: new: %w", err)
	}
	s.pods.AddHandler(consumer.Handler[*corev1.Pod]{
		OnAdd:    func(p *corev1.Pod, ev *events.Event) { s.onPod(p, ev) },
		OnUpdate: func(_, p *corev1.Pod, ev *events.Event) { s.onPod(p, ev) },
		OnDelete: s.onPodDelete,
	})
	s.nodes.AddHandler(consumer.Handler[*corev1.Node]{
		OnAdd:    func(n *corev1.Node, _ *events.Event) { s.onNode(n) },
		OnUpdate: func(_, n *corev1.Node, _ *events.Event) { s.onNode(n) },
		OnDelete: func(n *corev1.Node, _ *events.Event) { s.cache.removeNode(n.Name) },
	})
	return nil
}

// Run runs the scheduler's Manager (its caches, loops, recorder and shard)
// until ctx ends. It returns once every goroutine it started (bindings and
// status writes in flight included) has returned; an error only if a cache
// fails. A scheduler built with NewScheduler on a Manager that runs other
// parts too is run by running that Manager instead.
func (s *Scheduler) Run(ctx context.Context) error {
	if err := s.m.Run(ctx); err != nil {
		return fmt.Errorf("scheduler: %w", err)
	}
	return nil
}

// WaitForSync blocks until the caches hold their first snapshot.
func (s *Scheduler) WaitForSync(ctx context.Context) error {
	for _, c := range append([]consumer.Syncer{s.classes, s.nodes, s.pods}, s.volumes.Syncers()...) {
		if err := c.WaitForSync(ctx); err != nil {
			return fmt.Errorf("scheduler: wait for sync: %w", err)
		}
	}
	return nil
}

// withVolumeBinding puts vb after NodeResourcesFit, where kube-scheduler's
// default filters run it (the first filter to reject a node explains it).
func withVolumeBinding(ps []fw.Plugin, vb fw.Plugin) []fw.Plugin {
	for i, p := range ps {
		if p.Name() == plugins.NodeResourcesFitName {
			return append(ps[:i+1:i+1], append([]fw.Plugin{vb}, ps[i+1:]...)...)
		}
	}
	return append(ps, vb)
}

// Manager is the consumer.Manager the scheduler runs on.
func (s *Scheduler) Manager() *consumer.Manager { return s.m }

// responsible reports whether this replica should schedule pod now.
func (s *Scheduler) responsible(pod *corev1.Pod) bool {
	if pod.Spec.NodeName != "" || pod.DeletionTimestamp != nil || pod.Spec.SchedulerName != s.cfg.SchedulerName ||
		pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return false
	}
	return s.sharder == nil || s.sharder.Owns(consumer.KeyOf(pod))
}

// priority resolves a pod's priority: spec.priority, else its
// PriorityClass, else the global default class, else 0.
func (s *Scheduler) priority(pod *corev1.Pod) int32 {
	if pod.Spec.Priority != nil {
		return *pod.Spec.Priority
	}
	if name := pod.Spec.PriorityClassName; name != "" {
		if pc, ok := s.classes.Get("", name); ok {
			return pc.Value
		}
		return 0
	}
	for _, pc := range s.classes.List(nil) {
		if pc.GlobalDefault {
			return pc.Value
		}
	}
	return 0
}

func (s *Scheduler) podInfo(pod *corev1.Pod) *fw.PodInfo { return fw.NewPodInfo(pod, s.priority(pod)) }

func (s *Scheduler) onPod(pod *corev1.Pod, ev *events.Event) {
	key := consumer.KeyOf(pod)
	if pod.Spec.NodeName != "" {
		s.queue.Delete(key)
		freed, ours, conflict := s.cache.setPod(s.podInfo(pod))
		s.unguard(key)
		if freed {
			s.queue.MoveAllToActiveOrBackoff()
		}
		if ours {
			s.seenBound(pod, conflict, ev)
		}
		return
	}
	if !s.responsible(pod) || s.cache.isAssumed(key) {
		if !s.cache.isAssumed(key) {
			s.queue.Delete(key)
		}
		return
	}
	pi := s.podInfo(pod)
	if nom := pod.Status.NominatedNodeName; nom != "" {
		s.cache.nominate(pi, nom)
	}
	s.mu.Lock()
	if _, ok := s.causes[key]; !ok || ev != nil {
		s.causes[key] = consumer.CauseOf(ev)
	}
	s.mu.Unlock()
	s.queue.Update(pi)
}

func (s *Scheduler) onPodDelete(pod *corev1.Pod, _ *events.Event) {
	key := consumer.KeyOf(pod)
	s.queue.Delete(key)
	s.unguard(key)
	s.mu.Lock()
	delete(s.causes, key)
	delete(s.confirms, key)
	s.mu.Unlock()
	if s.cache.removePod(key) {
		s.queue.MoveAllToActiveOrBackoff()
	}
}

func (s *Scheduler) onNode(n *corev1.Node) {
	if s.cache.setNode(n) {
		s.queue.MoveAllToActiveOrBackoff()
	}
}

// requeuePartition queues the pending pods of a partition this replica
// just acquired (sharded mode).
func (s *Scheduler) requeuePartition(p int) {
	for _, pod := range s.pods.List(nil) {
		if pod.Spec.NodeName == "" && s.sharder.Partition(consumer.KeyOf(pod)) == p {
			s.onPod(pod, nil)
		}
	}
}

func (s *Scheduler) cause(key string) consumer.Cause {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.causes[key]
}
