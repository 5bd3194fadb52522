package daemonset

import (
	"fmt"
	"log/slog"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/events/consumer"
	"github.com/cairn-dev/cairn/services/controllers/history"
	"github.com/cairn-dev/cairn/services/controllers/podclaim"
	"github.com/cairn-dev/cairn/services/controllers/podcontrol"
	"github.com/cairn-dev/cairn/services/eventrecord"
)

// Name is the controller's name in logs and metrics.
const Name = "daemonset"

// Component is the source of the controller's Events, as kube's.
const Component = "daemonset-controller"

// burstReplicas caps the pods created or deleted in one round (kube's
// BurstReplicas of 250).
const burstReplicas = 250

// Failed-pod back-off, per DaemonSet and node (kube's failedPodsBackoff).
const (
	failedPodsBackoffBase = time.Second
	failedPodsBackoffMax  = 15 * time.Minute
)

var (
	daemonSetsResource = appsv1.SchemeGroupVersion.WithResource("daemonsets")
	podsResource       = corev1.SchemeGroupVersion.WithResource("pods")
	nodesResource      = corev1.SchemeGroupVersion.WithResource("nodes")
	controllerKind     = appsv1.SchemeGroupVersion.WithKind("DaemonSet")
)

// Options configure the controller.
type Options struct {
	// Workers is the number of DaemonSets reconciled at once; 0 means 2
	// (kube's --concurrent-daemonset-syncs).
	Workers int
	// Clock is the time source for availability, expectations and the
	// failed-pod back-off; nil is time.Now.
	Clock func() time.Time
	// EventQPS and EventBurst limit the rate of Event writes (see package
	// eventrecord); 0 takes the controller defaults.
	EventQPS   float32
	EventBurst int
}

// Controller is the DaemonSet controller. Build it with New; its Manager
// runs it.
type Controller struct {
	log     *slog.Logger
	now     func() time.Time
	client  kubernetes.Interface
	dsets   *consumer.Cache[*appsv1.DaemonSet]
	pods    *consumer.Cache[*corev1.Pod]
	nodes   *consumer.Cache[*corev1.Node]
	revs    *consumer.Cache[*appsv1.ControllerRevision]
	history *history.History
	ctrl    *consumer.Controller
	expect  *podcontrol.Expectations
	backoff *flowcontrol.Backoff
	// recorder writes the Events about DaemonSets.
	recorder *eventrecord.Recorder
}

// New builds the controller on m's caches (DaemonSets, nodes, pods and
// ControllerRevisions, the last two Partitioned), client and recorder.
func New(m *consumer.Manager, opts Options) (*Controller, error) {
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	if opts.Workers <= 0 {
		opts.Workers = 2
	}
	log := m.Log().With("controller", Name)
	wrap := func(err error) error { return fmt.Errorf("daemonset: new: %w", err) }
	recorder, err := eventrecord.ForManager(m, eventrecord.Config{Component: Component, Now: opts.Clock, Log: log},
		opts.EventQPS, opts.EventBurst)
	if err != nil {
		return nil, wrap(err)
	}
	c := &Controller{
		log: log, now: opts.Clock, client: m.Client(), recorder: recorder,
		expect:  podcontrol.NewExpectations(opts.Clock, podcontrol.ExpectationsTimeout),
		backoff: flowcontrol.NewBackOff(failedPodsBackoffBase, failedPodsBackoffMax),
	}
	if c.dsets, err = consumer.CacheFor[*appsv1.DaemonSet](m, daemonSetsResource); err != nil {
		return nil, wrap(err)
	}
	if c.nodes, err = consumer.CacheFor[*corev1.Node](m, nodesResource); err != nil {
		return nil, wrap(err)
	}
	c.pods, err = consumer.CacheFor[*corev1.Pod](m, podsResource, consumer.Partitioned(),
		consumer.WithIndexers(podclaim.OrphanIndexers()))
	if err != nil {
		return nil, wrap(err)
	}
	if c.revs, err = history.CacheFor(m); err != nil {
		return nil, wrap(err)
	}
	c.history = history.New(c.client, c.revs)
	c.ctrl, err = m.NewController(consumer.ControllerConfig{
		Name: Name, Reconciler: c, Workers: opts.Workers,
		WaitFor: []consumer.Syncer{c.dsets, c.nodes, c.pods, c.revs},
	})
	if err != nil {
		return nil, wrap(err)
	}
	c.dsets.AddHandler(consumer.Handler[*appsv1.DaemonSet]{
		OnAdd:    func(ds *appsv1.DaemonSet, ev *events.Event) { c.enqueue(ds, ev) },
		OnUpdate: func(_, ds *appsv1.DaemonSet, ev *events.Event) { c.enqueue(ds, ev) },
		OnDelete: func(ds *appsv1.DaemonSet, ev *events.Event) {
			c.expect.Forget(consumer.KeyOf(ds))
			c.enqueue(ds, ev)
		},
	})
	consumer.ResyncFrom(c.dsets, c.ctrl, nil)
	c.pods.AddHandler(podcontrol.PodEvents{Kind: controllerKind, Expect: c.expect, Enqueue: c.ctrl.Enqueue, Adopters: c.adopters}.Handler())
	c.nodes.AddHandler(consumer.Handler[*corev1.Node]{
		OnAdd:    func(n *corev1.Node, ev *events.Event) { c.onNodeChange(nil, n, ev) },
		OnUpdate: func(old, n *corev1.Node, ev *events.Event) { c.onNodeChange(old, n, ev) },
		OnDelete: func(n *corev1.Node, ev *events.Event) { c.enqueueAll(ev) },
	})
	consumer.Watch(c.revs, c.ctrl, consumer.OwnerKeys[*appsv1.ControllerRevision](controllerKind.Kind))
	return c, nil
}

func (c *Controller) enqueue(ds *appsv1.DaemonSet, ev *events.Event) {
	c.ctrl.Enqueue(consumer.KeyOf(ds), ev)
}

func (c *Controller) enqueueAll(ev *events.Event) {
	for _, ds := range c.dsets.List(labels.Everything()) {
		c.enqueue(ds, ev)
	}
}

// onNodeChange queues the DaemonSets whose placement on the node changes:
// all that should run on a new node, and on an update those for which
// shouldRun or shouldContinue flips (kube's addNode and updateNode).
// Heartbeats (condition times only) are ignored.
func (c *Controller) onNodeChange(old, node *corev1.Node, ev *events.Event) {
	if old != nil && shouldIgnoreNodeUpdate(*old, *node) {
		return
	}
	for _, ds := range c.dsets.List(labels.Everything()) {
		p, err := newPlacement(ds)
		if err != nil {
			continue
		}
		run, cont := p.shouldRun(node)
		if old == nil {
			if run {
				c.enqueue(ds, ev)
			}
			continue
		}
		if oldRun, oldCont := p.shouldRun(old); oldRun != run || oldCont != cont {
			c.enqueue(ds, ev)
		}
	}
}

// shouldIgnoreNodeUpdate reports whether only the resourceVersion and
// condition details changed, with the same conditions true (kube's).
func shouldIgnoreNodeUpdate(old, cur corev1.Node) bool {
	if !sameTrueConditions(old.Status.Conditions, cur.Status.Conditions) {
		return false
	}
	old.ResourceVersion = cur.ResourceVersion
	old.Status.Conditions = cur.Status.Conditions
	return apiequality.Semantic.DeepEqual(old, cur)
}

func sameTrueConditions(a, b []corev1.NodeCondition) bool {
	set := map[corev1.NodeConditionType]bool{}
	for _, c := range a {
		if c.Status == corev1.ConditionTrue {
			set[c.Type] = true
		}
	}
	for _, c := range b {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		if !set[c.Type] {
			return false
		}
		delete(set, c.Type)
	}
	return len(set) == 0
}

// adopters is the keys of the DaemonSets in pod's namespace whose selector
// matches it: those that could adopt it.
func (c *Controller) adopters(pod *corev1.Pod) []string {
	var out []string
	for _, ds := range c.dsets.ByIndex(consumer.IndexNamespace, pod.Namespace) {
		sel, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
		if err != nil || sel.Empty() || !sel.Matches(labels.Set(pod.Labels)) {
			continue
		}
		out = append(out, consumer.KeyOf(ds))
	}
	return out
}
