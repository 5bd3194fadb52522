package replicaset

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/events/consumer"
	"github.com/cairn-dev/cairn/services/eventrecord"
)

// Name is the controller's name in logs and metrics.
const Name = "replicaset"

// Component is the source of the controller's Events, as kube's.
const Component = "replicaset-controller"

// ErrConfig is returned by New for an incomplete Config.
var ErrConfig = errors.New("replicaset: bad config")

// burstReplicas caps the pods created or deleted in one round (kube's
// --replicaset burst of 500).
const burstReplicas = 500

var (
	replicaSetsResource = appsv1.SchemeGroupVersion.WithResource("replicasets")
	podsResource        = corev1.SchemeGroupVersion.WithResource("pods")
	controllerKind      = appsv1.SchemeGroupVersion.WithKind("ReplicaSet")
)

// Config configures the controller.
type Config struct {
	// RestConfig reaches the apiserver as the controller manager.
	RestConfig *rest.Config
	// JS reads the log.
	JS jetstream.JetStream
	// Workers is the number of ReplicaSets reconciled at once; 0 means 5
	// (kube's --concurrent-replicaset-syncs).
	Workers int
	// Owns reports whether this replica handles a ReplicaSet key; nil owns
	// all of them.
	Owns func(key string) bool
	// Guard, if set, is checked right before each reconcile instead of
	// Owns (see consumer.ControllerConfig.Guard).
	Guard func(key string) (done func(), ok bool)
	Log   *slog.Logger
	// Clock is the time source for availability and expectations; nil is
	// time.Now.
	Clock func() time.Time
	// Pods and ReplicaSets are caches shared with other controllers of the
	// same process (so each event is decoded once), run by whoever made
	// them; the pod cache must have PodIndexers. Nil: New makes its own
	// and Run runs them.
	Pods        *consumer.Cache[*corev1.Pod]
	ReplicaSets *consumer.Cache[*appsv1.ReplicaSet]
	// EventQPS and EventBurst limit the rate of Event writes (see package
	// eventrecord): 0 takes eventrecord.ControllerQPS and ControllerBurst,
	// as kube-controller-manager's clients; a negative EventQPS does not
	// limit.
	EventQPS   float32
	EventBurst int
}

// PodIndexers are the indexes the controller needs on a shared pod cache.
func PodIndexers() map[string]consumer.IndexFunc[*corev1.Pod] {
	return map[string]consumer.IndexFunc[*corev1.Pod]{indexOrphans: orphanNamespace}
}

// Controller is the ReplicaSet controller. Build it with New and start it
// with Run.
type Controller struct {
	log    *slog.Logger
	now    func() time.Time
	client kubernetes.Interface
	rsets  *consumer.Cache[*appsv1.ReplicaSet]
	pods   *consumer.Cache[*corev1.Pod]
	ctrl   *consumer.Controller
	expect *expectations
	// recorder writes the Events of pod creates and deletes.
	recorder *eventrecord.Recorder
	// own are the caches (and the recorder) this controller made and runs.
	own []consumer.Runner
}

// New builds the controller, its caches and its queue.
func New(cfg Config) (*Controller, error) {
	if cfg.RestConfig == nil || cfg.JS == nil {
		return nil, fmt.Errorf("replicaset: new: RestConfig and JS are required: %w", ErrConfig)
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 5
	}
	log := cfg.Log.With("controller", Name)
	// A worker creates or deletes up to a slow-start batch of pods at once.
	client, err := consumer.NewClient(consumer.WrapConfig(cfg.RestConfig), cfg.Workers*32)
	if err != nil {
		return nil, fmt.Errorf("replicaset: new client: %w", err)
	}
	recorder, err := eventrecord.NewForController(cfg.RestConfig, eventrecord.Config{Component: Component, Now: cfg.Clock, Log: log},
		cfg.EventQPS, cfg.EventBurst)
	if err != nil {
		return nil, fmt.Errorf("replicaset: new: %w", err)
	}
	own := []consumer.Runner{recorder}
	rsets, err := consumer.SharedOr(cfg.ReplicaSets, consumer.CacheConfig[*appsv1.ReplicaSet]{
		Resource: replicaSetsResource, Config: cfg.RestConfig, JS: cfg.JS, Log: log,
	}, &own)
	if err != nil {
		return nil, fmt.Errorf("replicaset: new: %w", err)
	}
	pods, err := consumer.SharedOr(cfg.Pods, consumer.CacheConfig[*corev1.Pod]{
		Resource: podsResource, Config: cfg.RestConfig, JS: cfg.JS, Log: log, Indexers: PodIndexers(),
	}, &own)
	if err != nil {
		return nil, fmt.Errorf("replicaset: new: %w", err)
	}
	c := &Controller{
		own:      own,
		log:      log,
		now:      cfg.Clock,
		client:   client,
		rsets:    rsets,
		pods:     pods,
		expect:   newExpectations(cfg.Clock, ExpectationsTimeout),
		recorder: recorder,
	}
	c.ctrl, err = consumer.NewController(consumer.ControllerConfig{
		Name: Name, Reconciler: c, Workers: cfg.Workers, Owns: cfg.Owns, Guard: cfg.Guard,
		WaitFor: []consumer.Syncer{rsets, pods}, Log: cfg.Log,
	})
	if err != nil {
		return nil, fmt.Errorf("replicaset: new: %w", err)
	}
	rsets.AddHandler(consumer.Handler[*appsv1.ReplicaSet]{
		OnAdd:    func(rs *appsv1.ReplicaSet, ev *events.Event) { c.enqueue(rs, ev) },
		OnUpdate: func(_, rs *appsv1.ReplicaSet, ev *events.Event) { c.enqueue(rs, ev) },
		OnDelete: c.onReplicaSetDelete,
	})
	pods.AddHandler(consumer.Handler[*corev1.Pod]{
		OnAdd:    c.onPodAdd,
		OnUpdate: c.onPodUpdate,
		OnDelete: c.onPodDelete,
	})
	return c, nil
}

// Run starts the caches and the workers and blocks until ctx ends; it
// returns after every goroutine it started has returned. It returns an
// error only if a cache fails.
func (c *Controller) Run(ctx context.Context) error {
	if err := consumer.RunAll(ctx, append(c.own, c.ctrl)...); err != nil {
		return fmt.Errorf("replicaset: %w", err)
	}
	return nil
}

// WaitForSync waits until both caches hold their first snapshot (Run
// must be running): changes made after it returns reach the controller as
// events, with their causation.
func (c *Controller) WaitForSync(ctx context.Context) error {
	if err := c.rsets.WaitForSync(ctx); err != nil {
		return fmt.Errorf("replicaset: wait for sync: %w", err)
	}
	if err := c.pods.WaitForSync(ctx); err != nil {
		return fmt.Errorf("replicaset: wait for sync: %w", err)
	}
	return nil
}

func (c *Controller) enqueue(rs *appsv1.ReplicaSet, ev *events.Event) {
	c.ctrl.Enqueue(consumer.KeyOf(rs), ev)
}

func (c *Controller) onReplicaSetDelete(rs *appsv1.ReplicaSet, ev *events.Event) {
	key := consumer.KeyOf(rs)
	c.expect.forget(key)
	c.ctrl.Enqueue(key, ev)
}

// controllerOf is the key and UID of the ReplicaSet that controls pod, if a
// ReplicaSet does.
func controllerOf(pod *corev1.Pod) (key string, ref *metav1.OwnerReference) {
	ref = metav1.GetControllerOfNoCopy(pod)
	if ref == nil || ref.Kind != controllerKind.Kind {
		return "", nil
	}
	if gv, err := schema.ParseGroupVersion(ref.APIVersion); err != nil || gv.Group != controllerKind.Group {
		return "", nil
	}
	return consumer.Key(pod.Namespace, ref.Name), ref
}

func (c *Controller) onPodAdd(pod *corev1.Pod, ev *events.Event) {
	if pod.DeletionTimestamp != nil {
		// Seen for the first time already terminating (a snapshot after a
		// restart): it is a deletion, not a creation.
		c.onPodDelete(pod, ev)
		return
	}
	if key, ref := controllerOf(pod); ref != nil {
		c.expect.creationObserved(key, ref.UID)
		c.ctrl.Enqueue(key, ev)
		return
	}
	if metav1.GetControllerOfNoCopy(pod) == nil {
		// An orphan: every ReplicaSet that could adopt it.
		for _, rs := range c.matching(pod) {
			c.enqueue(rs, ev)
		}
	}
}

func (c *Controller) onPodUpdate(old, pod *corev1.Pod, ev *events.Event) {
	if old.ResourceVersion == pod.ResourceVersion {
		return
	}
	labelsChanged := !labels.Equals(old.Labels, pod.Labels)
	if pod.DeletionTimestamp != nil {
		// Graceful deletion: the pod stops counting now, and the
		// ReplicaSet may replace it without waiting for the DELETED event.
		c.onPodDelete(pod, ev)
		if labelsChanged {
			c.onPodDelete(old, ev)
		}
		return
	}
	oldKey, oldRef := controllerOf(old)
	key, ref := controllerOf(pod)
	refChanged := !sameRef(oldRef, ref)
	if refChanged && oldRef != nil {
		c.ctrl.Enqueue(oldKey, ev)
	}
	if ref != nil {
		c.ctrl.Enqueue(key, ev)
		return
	}
	if metav1.GetControllerOfNoCopy(pod) == nil && (labelsChanged || refChanged) {
		for _, rs := range c.matching(pod) {
			c.enqueue(rs, ev)
		}
	}
}

func (c *Controller) onPodDelete(pod *corev1.Pod, ev *events.Event) {
	if key, ref := controllerOf(pod); ref != nil {
		c.expect.deletionObserved(key, ref.UID, pod.UID)
		c.ctrl.Enqueue(key, ev)
	}
}

func sameRef(a, b *metav1.OwnerReference) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.UID == b.UID
}

// matching is the ReplicaSets in pod's namespace whose selector matches it.
func (c *Controller) matching(pod *corev1.Pod) []*appsv1.ReplicaSet {
	var out []*appsv1.ReplicaSet
	for _, rs := range c.rsets.ByIndex(consumer.IndexNamespace, pod.Namespace) {
		sel, err := metav1.LabelSelectorAsSelector(rs.Spec.Selector)
		if err != nil || sel.Empty() || !sel.Matches(labels.Set(pod.Labels)) {
			continue
		}
		out = append(out, rs)
	}
	return out
}
