package deployment

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
	"github.com/cairn-dev/cairn/services/controllers/writes"
	"github.com/cairn-dev/cairn/services/eventrecord"
)

// Options configure the controller.
type Options struct {
	// Workers is the number of deployments reconciled at once; 0 means 1.
	Workers int
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

// Controller is the Deployment controller. Build it with New; its Manager
// runs it.
type Controller struct {
	client      kubernetes.Interface
	deployments *consumer.Cache[*appsv1.Deployment]
	rss         *consumer.Cache[*appsv1.ReplicaSet]
	pods        *consumer.Cache[*corev1.Pod]
	ctrl        *consumer.Controller
	log         *slog.Logger
	now         func() time.Time
	recorder    *eventrecord.Recorder
	// rssWritten is, per deployment key, the revision of this replica's
	// last write to one of its replica sets, until the replica set cache
	// shows it (see Reconcile).
	rssWritten *writes.Tracker
}

// Component is the source of the controller's Events, as kube's.
const Component = "deployment-controller"

var deploymentKind = appsv1.SchemeGroupVersion.WithKind("Deployment")

var (
	deploymentsGVR = appsv1.SchemeGroupVersion.WithResource("deployments")
	replicaSetsGVR = appsv1.SchemeGroupVersion.WithResource("replicasets")
	podsGVR        = corev1.SchemeGroupVersion.WithResource("pods")
)

// New builds the controller on m's caches (pods Partitioned), client and
// recorder.
func New(m *consumer.Manager, opts Options) (*Controller, error) {
	log := m.Log().With("controller", "deployment")
	now := opts.Clock
	if now == nil {
		now = time.Now
	}
	recorder, err := eventrecord.ForManager(m, eventrecord.Config{Component: Component, Now: now, Log: log},
		opts.EventQPS, opts.EventBurst)
	if err != nil {
		return nil, fmt.Errorf("deployment: %w", err)
	}
	c := &Controller{client: m.Client(), log: log, now: now, recorder: recorder, rssWritten: writes.New()}
	if c.deployments, err = consumer.CacheFor[*appsv1.Deployment](m, deploymentsGVR); err != nil {
		return nil, fmt.Errorf("deployment: cache: %w", err)
	}
	if c.rss, err = consumer.CacheFor[*appsv1.ReplicaSet](m, replicaSetsGVR); err != nil {
		return nil, fmt.Errorf("deployment: cache: %w", err)
	}
	if c.pods, err = consumer.CacheFor[*corev1.Pod](m, podsGVR, consumer.Partitioned()); err != nil {
		return nil, fmt.Errorf("deployment: cache: %w", err)
	}
	if c.ctrl, err = m.NewController(consumer.ControllerConfig{
		Name: "deployment", Reconciler: c, Workers: opts.Workers, Log: log,
		WaitFor: []consumer.Syncer{c.deployments, c.rss, c.pods},
	}); err != nil {
		return nil, fmt.Errorf("deployment: controller: %w", err)
	}
	consumer.For(c.deployments, c.ctrl, nil)
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
