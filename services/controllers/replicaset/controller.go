package replicaset

import (
	"fmt"
	"log/slog"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/events/consumer"
	"github.com/cairn-dev/cairn/services/controllers/podclaim"
	"github.com/cairn-dev/cairn/services/controllers/podcontrol"
	"github.com/cairn-dev/cairn/services/eventrecord"
)

// Name is the controller's name in logs and metrics.
const Name = "replicaset"

// Component is the source of the controller's Events, as kube's.
const Component = "replicaset-controller"

// burstReplicas caps the pods created or deleted in one round (kube's
// --replicaset burst of 500).
const burstReplicas = 500

var (
	replicaSetsResource = appsv1.SchemeGroupVersion.WithResource("replicasets")
	podsResource        = corev1.SchemeGroupVersion.WithResource("pods")
	controllerKind      = appsv1.SchemeGroupVersion.WithKind("ReplicaSet")
)

// Options configure the controller.
type Options struct {
	// Workers is the number of ReplicaSets reconciled at once; 0 means 5
	// (kube's --concurrent-replicaset-syncs).
	Workers int
	// Clock is the time source for availability and expectations; nil is
	// time.Now.
	Clock func() time.Time
	// EventQPS and EventBurst limit the rate of Event writes (see package
	// eventrecord): 0 takes eventrecord.ControllerQPS and ControllerBurst,
	// as kube-controller-manager's clients; a negative EventQPS does not
	// limit.
	EventQPS   float32
	EventBurst int
}

// PodIndexers are the indexes the controller needs on a shared pod cache.
func PodIndexers() map[string]consumer.IndexFunc[*corev1.Pod] {
	return podclaim.OrphanIndexers()
}

// Controller is the ReplicaSet controller. Build it with New; its
// Manager runs it.
type Controller struct {
	log    *slog.Logger
	now    func() time.Time
	client kubernetes.Interface
	rsets  *consumer.Cache[*appsv1.ReplicaSet]
	pods   *consumer.Cache[*corev1.Pod]
	ctrl   *consumer.Controller
	expect *podcontrol.Expectations
	// recorder writes the Events of pod creates and deletes.
	recorder *eventrecord.Recorder
}

// New builds the controller on m's caches (pods with PodIndexers and
// Partitioned), client and recorder.
func New(m *consumer.Manager, opts Options) (*Controller, error) {
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	if opts.Workers <= 0 {
		opts.Workers = 5
	}
	log := m.Log().With("controller", Name)
	recorder, err := eventrecord.ForManager(m, eventrecord.Config{Component: Component, Now: opts.Clock, Log: log},
		opts.EventQPS, opts.EventBurst)
	if err != nil {
		return nil, fmt.Errorf("replicaset: new: %w", err)
	}
	rsets, err := consumer.CacheFor[*appsv1.ReplicaSet](m, replicaSetsResource)
	if err != nil {
		return nil, fmt.Errorf("replicaset: new: %w", err)
	}
	pods, err := consumer.CacheFor[*corev1.Pod](m, podsResource, consumer.WithIndexers(PodIndexers()), consumer.Partitioned())
	if err != nil {
		return nil, fmt.Errorf("replicaset: new: %w", err)
	}
	c := &Controller{
		log:      log,
		now:      opts.Clock,
		client:   m.Client(),
		rsets:    rsets,
		pods:     pods,
		expect:   podcontrol.NewExpectations(opts.Clock, ExpectationsTimeout),
		recorder: recorder,
	}
	c.ctrl, err = m.NewController(consumer.ControllerConfig{
		Name: Name, Reconciler: c, Workers: opts.Workers,
		WaitFor: []consumer.Syncer{rsets, pods},
	})
	if err != nil {
		return nil, fmt.Errorf("replicaset: new: %w", err)
	}
	rsets.AddHandler(consumer.Handler[*appsv1.ReplicaSet]{
		OnAdd:    func(rs *appsv1.ReplicaSet, ev *events.Event) { c.enqueue(rs, ev) },
		OnUpdate: func(_, rs *appsv1.ReplicaSet, ev *events.Event) { c.enqueue(rs, ev) },
		OnDelete: c.onReplicaSetDelete,
	})
	consumer.ResyncFrom(rsets, c.ctrl, nil)
	pods.AddHandler(podcontrol.PodEvents{Kind: controllerKind, Expect: c.expect, Enqueue: c.ctrl.Enqueue, Adopters: c.adopters}.Handler())
	return c, nil
}

func (c *Controller) enqueue(rs *appsv1.ReplicaSet, ev *events.Event) {
	c.ctrl.Enqueue(consumer.KeyOf(rs), ev)
}

func (c *Controller) onReplicaSetDelete(rs *appsv1.ReplicaSet, ev *events.Event) {
	key := consumer.KeyOf(rs)
	c.expect.Forget(key)
	c.ctrl.Enqueue(key, ev)
}

// adopters is the keys of the ReplicaSets in pod's namespace whose selector
// matches it: those that could adopt it.
func (c *Controller) adopters(pod *corev1.Pod) []string {
	var out []string
	for _, rs := range c.rsets.ByIndex(consumer.IndexNamespace, pod.Namespace) {
		sel, err := metav1.LabelSelectorAsSelector(rs.Spec.Selector)
		if err != nil || sel.Empty() || !sel.Matches(labels.Set(pod.Labels)) {
			continue
		}
		out = append(out, consumer.KeyOf(rs))
	}
	return out
}
