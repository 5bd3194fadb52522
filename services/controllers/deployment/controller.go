package deployment

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
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/events/consumer"
	"github.com/cairn-dev/cairn/services/eventrecord"
)

// ErrConfig is returned by New for an incomplete Config.
var ErrConfig = errors.New("deployment: bad config")

// Config configures the controller.
type Config struct {
	// RestConfig reaches the apiserver as the controller manager.
	RestConfig *rest.Config
	// JS reads the log.
	JS jetstream.JetStream
	// Workers is the number of deployments reconciled at once; 0 means 1.
	Workers int
	// Owns reports whether this replica handles a deployment key; nil owns
	// every key.
	Owns func(key string) bool
	// Guard, if set, is checked right before each reconcile instead of
	// Owns (see consumer.ControllerConfig.Guard).
	Guard func(key string) (done func(), ok bool)
	// Deployments, Pods and ReplicaSets are caches shared with other
	// controllers of the same process (so each event is decoded once), run
	// by whoever made them. Nil: New makes its own and Run runs them.
	Deployments *consumer.Cache[*appsv1.Deployment]
	Pods        *consumer.Cache[*corev1.Pod]
	ReplicaSets *consumer.Cache[*appsv1.ReplicaSet]
	Log         *slog.Logger
	// Clock gives the time of conditions and progress deadlines; nil is
	// time.Now.
	Clock func() time.Time
	// EventQPS and EventBurst limit the rate of Event writes (see package
	// eventrecord): 0 takes eventrecord.ControllerQPS and ControllerBurst,
	// as kube-controller-manager's clients; a negative EventQPS does not
	// limit.
	EventQPS   float32
	EventBurst int
}

// Controller is the Deployment controller.
type Controller struct {
	client      kubernetes.Interface
	deployments *consumer.Cache[*appsv1.Deployment]
	rss         *consumer.Cache[*appsv1.ReplicaSet]
	pods        *consumer.Cache[*corev1.Pod]
	ctrl        *consumer.Controller
	log         *slog.Logger
	now         func() time.Time
	recorder    *eventrecord.Recorder
	// own are the caches (and the event recorder) this controller made
	// and runs.
	own []consumer.Runner
}

// Component is the source of the controller's Events, as kube's.
const Component = "deployment-controller"

var deploymentKind = appsv1.SchemeGroupVersion.WithKind("Deployment")

var (
	deploymentsGVR = appsv1.SchemeGroupVersion.WithResource("deployments")
	replicaSetsGVR = appsv1.SchemeGroupVersion.WithResource("replicasets")
	podsGVR        = corev1.SchemeGroupVersion.WithResource("pods")
)

// New builds the controller; Run starts it.
func New(cfg Config) (*Controller, error) {
	if cfg.RestConfig == nil || cfg.JS == nil {
		return nil, fmt.Errorf("%w: RestConfig and JS are required", ErrConfig)
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("controller", "deployment")
	now := cfg.Clock
	if now == nil {
		now = time.Now
	}
	client, err := consumer.NewClient(consumer.WrapConfig(cfg.RestConfig), max(cfg.Workers, 1)+1)
	if err != nil {
		return nil, fmt.Errorf("deployment: client: %w", err)
	}
	recorder, err := eventrecord.NewForController(cfg.RestConfig, eventrecord.Config{Component: Component, Now: now, Log: log},
		cfg.EventQPS, cfg.EventBurst)
	if err != nil {
		return nil, fmt.Errorf("deployment: %w", err)
	}
	c := &Controller{client: client, log: log, now: now, recorder: recorder}
	c.own = append(c.own, c.recorder)
	if c.deployments, err = consumer.SharedOr(cfg.Deployments, consumer.CacheConfig[*appsv1.Deployment]{
		Resource: deploymentsGVR, Config: cfg.RestConfig, JS: cfg.JS, Log: log,
	}, &c.own); err != nil {
		return nil, fmt.Errorf("deployment: cache: %w", err)
	}
	if c.rss, err = consumer.SharedOr(cfg.ReplicaSets, consumer.CacheConfig[*appsv1.ReplicaSet]{
		Resource: replicaSetsGVR, Config: cfg.RestConfig, JS: cfg.JS, Log: log,
	}, &c.own); err != nil {
		return nil, fmt.Errorf("deployment: cache: %w", err)
	}
	if c.pods, err = consumer.SharedOr(cfg.Pods, consumer.CacheConfig[*corev1.Pod]{
		Resource: podsGVR, Config: cfg.RestConfig, JS: cfg.JS, Log: log,
	}, &c.own); err != nil {
		return nil, fmt.Errorf("deployment: cache: %w", err)
	}
	if c.ctrl, err = consumer.NewController(consumer.ControllerConfig{
		Name: "deployment", Reconciler: c, Workers: cfg.Workers, Owns: cfg.Owns, Guard: cfg.Guard, Log: log,
		WaitFor: []consumer.Syncer{c.deployments, c.rss, c.pods},
	}); err != nil {
		return nil, fmt.Errorf("deployment: controller: %w", err)
	}
	consumer.Watch(c.deployments, c.ctrl, nil)
	consumer.Watch(c.rss, c.ctrl, c.replicaSetKeys)
	// As kube: a pod going away matters to a Recreate rollout waiting for
	// the old pods to be gone; other pod changes reach the deployment
	// through its replica sets' status.
	c.pods.AddHandler(consumer.Handler[*corev1.Pod]{OnDelete: func(pod *corev1.Pod, ev *events.Event) {
		for _, k := range c.podKeys(pod) {
			c.ctrl.Enqueue(k, ev)
		}
	}})
	return c, nil
}

// Run runs the caches and the workers until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	return consumer.RunAll(ctx, append(c.own, c.ctrl)...)
}

// replicaSetKeys maps a replica set to its deployment, or an orphan to the
// deployments whose selector matches it (they may adopt it).
func (c *Controller) replicaSetKeys(rs *appsv1.ReplicaSet) []string {
	if ref := metav1.GetControllerOf(rs); ref != nil {
		if ref.Kind != "Deployment" {
			return nil
		}
		return []string{consumer.Key(rs.Namespace, ref.Name)}
	}
	var keys []string
	for _, d := range c.deployments.ByIndex(consumer.IndexNamespace, rs.Namespace) {
		sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
		if err != nil || sel.Empty() || !sel.Matches(labels.Set(rs.Labels)) {
			continue
		}
		keys = append(keys, consumer.KeyOf(d))
	}
	return keys
}

// podKeys maps a pod to the deployment of its replica set.
func (c *Controller) podKeys(pod *corev1.Pod) []string {
	ref := metav1.GetControllerOf(pod)
	if ref == nil || ref.Kind != "ReplicaSet" {
		return nil
	}
	rs, ok := c.rss.Get(pod.Namespace, ref.Name)
	if !ok || rs.UID != ref.UID {
		return nil
	}
	if dref := metav1.GetControllerOf(rs); dref != nil && dref.Kind == "Deployment" {
		return []string{consumer.Key(rs.Namespace, dref.Name)}
	}
	return nil
}
