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

// Scheduler is one scheduler replica. Build it with New and start it with
// Run.
type Scheduler struct {
	cfg    Config
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
	work     chan func()
	stats    counters

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

// New builds a scheduler replica, its caches and its queue.
func New(cfg Config) (*Scheduler, error) {
	if cfg.RestConfig == nil || cfg.JS == nil {
		return nil, fmt.Errorf("scheduler: new: RestConfig and JS are required: %w", ErrConfig)
	}
	if cfg.SchedulerName == "" {
		cfg.SchedulerName = DefaultSchedulerName
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 256
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.Identity == "" {
		host, _ := os.Hostname()
		cfg.Identity = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	log := cfg.Log.With("component", "scheduler", "scheduler", cfg.SchedulerName)
	rc := rest.CopyConfig(cfg.RestConfig)
	if rc.QPS == 0 {
		rc.QPS, rc.Burst = 5000, 10000
	}
	if rc.UserAgent == "" {
		// The field manager of its writes, as kube's "kube-scheduler".
		rc.UserAgent = "cairn-scheduler"
	}
	client, err := consumer.NewClient(consumer.WrapConfig(rc), cfg.Workers+4)
	if err != nil {
		return nil, err
	}
	eventClient, err := eventrecord.NewClient(rc, cfg.EventQPS, cfg.EventBurst)
	if err != nil {
		return nil, err
	}
	s := &Scheduler{
		cfg: cfg, log: log, client: client, cache: newCache(),
		queue:      queue.New(queue.Config{InitialBackoff: cfg.InitialBackoff, MaxBackoff: cfg.MaxBackoff, Clock: cfg.Clock}),
		fw:         plugins.NewDefaultFramework(fw.Options{Parallelism: cfg.Parallelism, PercentageOfNodesToScore: cfg.PercentageOfNodesToScore}),
		work:       make(chan func()),
		violations: make(chan violation, violationQueue),
		causes:     map[string]consumer.Cause{},
		guards:     map[string]func(){},
		confirms:   map[string]*confirmation{},
	}
	s.recorder = &recorder{client: client, now: cfg.Clock, log: log, Recorder: eventrecord.New(eventClient,
		eventrecord.Config{Component: cfg.SchedulerName, Instance: cfg.Identity, Now: cfg.Clock, Log: log})}
	if err := s.newCaches(rc); err != nil {
		return nil, err
	}
	if cfg.Sharded {
		s.sharder, err = shard.New(shard.Config{JS: cfg.JS, Group: "scheduler-" + cfg.SchedulerName, Identity: cfg.Identity,
			CatchUp: s.pods.WaitForLog, OnAcquire: s.requeuePartition, Log: log})
		if err != nil {
			return nil, fmt.Errorf("scheduler: new: %w", err)
		}
	}
	return s, nil
}

func (s *Scheduler) newCaches(rc *rest.Config) error {
	var err error
	if s.pods, err = consumer.NewCache(consumer.CacheConfig[*corev1.Pod]{Resource: podsResource, Config: rc, JS: s.cfg.JS, Log: s.log}); err != nil {
		return fmt.Errorf("scheduler: new: %w", err)
	}
	if s.nodes, err = consumer.NewCache(consumer.CacheConfig[*corev1.Node]{Resource: nodesResource, Config: rc, JS: s.cfg.JS, Log: s.log}); err != nil {
		return fmt.Errorf("scheduler: new: %w", err)
	}
	if s.classes, err = consumer.NewCache(consumer.CacheConfig[*schedulingv1.PriorityClass]{Resource: priorityResource, Config: rc, JS: s.cfg.JS, Log: s.log}); err != nil {
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

// Run starts the caches, waits for them, and schedules until ctx ends. It
// returns once every goroutine it started (bindings and status writes in
// flight included) has returned; an error only if a cache fails.
func (s *Scheduler) Run(ctx context.Context) error {
	runners := []consumer.Runner{s.classes, s.nodes, s.pods, runnerFunc(s.loop), runnerFunc(s.recorder.Run), runnerFunc(s.deschedule)}
	if s.sharder != nil {
		runners = append(runners, s.sharder)
	}
	if err := consumer.RunAll(ctx, runners...); err != nil {
		return fmt.Errorf("scheduler: %w", err)
	}
	return nil
}

type runnerFunc func(ctx context.Context) error

func (f runnerFunc) Run(ctx context.Context) error { return f(ctx) }

// WaitForSync blocks until the caches hold their first snapshot.
func (s *Scheduler) WaitForSync(ctx context.Context) error {
	for _, c := range []consumer.Syncer{s.classes, s.nodes, s.pods} {
		if err := c.WaitForSync(ctx); err != nil {
			return fmt.Errorf("scheduler: wait for sync: %w", err)
		}
	}
	return nil
}

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
