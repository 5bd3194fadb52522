package statefulset

import (
	"fmt"
	"log/slog"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/events/consumer"
	"github.com/cairn-dev/cairn/services/controllers/history"
	"github.com/cairn-dev/cairn/services/controllers/podclaim"
	"github.com/cairn-dev/cairn/services/controllers/writes"
	"github.com/cairn-dev/cairn/services/eventrecord"
)

// Name is the controller's name in logs and metrics.
const Name = "statefulset"

// Component is the source of the controller's Events, as kube's.
const Component = "statefulset-controller"

var (
	setsResource   = appsv1.SchemeGroupVersion.WithResource("statefulsets")
	podsResource   = corev1.SchemeGroupVersion.WithResource("pods")
	controllerKind = appsv1.SchemeGroupVersion.WithKind("StatefulSet")
)

// Options configure the controller.
type Options struct {
	// Workers is the number of StatefulSets reconciled at once; 0 means 5
	// (kube's --concurrent-statefulset-syncs).
	Workers int
	// Clock is the time source for availability (minReadySeconds); nil is
	// time.Now.
	Clock func() time.Time
	// EventQPS and EventBurst limit the rate of Event writes (see package
	// eventrecord); 0 takes the controller defaults.
	EventQPS   float32
	EventBurst int
}

// Controller is the StatefulSet controller. Build it with New; its
// Manager runs it.
type Controller struct {
	log      *slog.Logger
	now      func() time.Time
	client   kubernetes.Interface
	sets     *consumer.Cache[*appsv1.StatefulSet]
	pods     *consumer.Cache[*corev1.Pod]
	revs     *consumer.Cache[*appsv1.ControllerRevision]
	history  history.Interface
	ctrl     *consumer.Controller
	recorder *eventrecord.Recorder
	// pvcs are the claims, for the retention policy (not Partitioned:
	// a set's claims have no controller).
	pvcs *consumer.Cache[*corev1.PersistentVolumeClaim]
	// written is the status writes the set cache has not shown yet;
	// revsWritten the revision writes the revision cache has not.
	written, revsWritten *writes.Tracker
}

// New builds the controller on m's caches (statefulsets; pods and
// controllerrevisions Partitioned), client and recorder.
func New(m *consumer.Manager, opts Options) (*Controller, error) {
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	if opts.Workers <= 0 {
		opts.Workers = 5
	}
	log := m.Log().With("controller", Name)
	recorder, err := eventrecord.ForManager(m, eventrecord.Config{Component: Component, Log: log},
		opts.EventQPS, opts.EventBurst)
	if err != nil {
		return nil, fmt.Errorf("statefulset: new: %w", err)
	}
	sets, err := consumer.CacheFor[*appsv1.StatefulSet](m, setsResource)
	if err != nil {
		return nil, fmt.Errorf("statefulset: new: %w", err)
	}
	pods, err := consumer.CacheFor[*corev1.Pod](m, podsResource, consumer.Partitioned(),
		consumer.WithIndexers(podclaim.OrphanIndexers()))
	if err != nil {
		return nil, fmt.Errorf("statefulset: new: %w", err)
	}
	pvcs, err := consumer.CacheFor[*corev1.PersistentVolumeClaim](m, corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims"))
	if err != nil {
		return nil, fmt.Errorf("statefulset: new: %w", err)
	}
	revs, err := history.CacheFor(m)
	if err != nil {
		return nil, fmt.Errorf("statefulset: new: %w", err)
	}
	c := &Controller{
		log: log, now: opts.Clock, client: m.Client(),
		sets: sets, pods: pods, revs: revs, history: history.New(m.Client(), revs),
		recorder: recorder, pvcs: pvcs,
		written: writes.New(), revsWritten: writes.New(),
	}
	c.ctrl, err = m.NewController(consumer.ControllerConfig{
		Name: Name, Reconciler: c, Workers: opts.Workers,
		WaitFor: []consumer.Syncer{sets, pods, revs, pvcs},
	})
	if err != nil {
		return nil, fmt.Errorf("statefulset: new: %w", err)
	}
	consumer.For(sets, c.ctrl, nil)
	// A revision write of a round queues its set, which waits for it.
	consumer.Watch(revs, c.ctrl, consumer.OwnerKeys[*appsv1.ControllerRevision](controllerKind.Kind))
	pods.AddHandler(consumer.Handler[*corev1.Pod]{
		OnAdd:    c.onPodAdd,
		OnUpdate: c.onPodUpdate,
		OnDelete: c.onPodDelete,
	})
	return c, nil
}

// setOf is the key of the StatefulSet that controls pod, if one does.
func setOf(pod *corev1.Pod) (string, bool) {
	ref := metav1.GetControllerOfNoCopy(pod)
	if ref == nil || ref.Kind != controllerKind.Kind {
		return "", false
	}
	if gv, err := schema.ParseGroupVersion(ref.APIVersion); err != nil || gv.Group != controllerKind.Group {
		return "", false
	}
	return consumer.Key(pod.Namespace, ref.Name), true
}

// onPodAdd queues the pod's set, or for an orphan every set that could
// adopt it (kube's addPod).
func (c *Controller) onPodAdd(pod *corev1.Pod, ev *events.Event) {
	if key, ok := setOf(pod); ok {
		c.ctrl.Enqueue(key, ev)
		return
	}
	if metav1.GetControllerOfNoCopy(pod) == nil {
		c.enqueueMatching(pod, ev)
	}
}

// onPodUpdate queues the old and new sets of the pod, and the sets that
// could adopt an orphan whose labels or owner changed (kube's updatePod).
func (c *Controller) onPodUpdate(old, pod *corev1.Pod, ev *events.Event) {
	if old.ResourceVersion == pod.ResourceVersion {
		return
	}
	oldKey, oldOK := setOf(old)
	key, ok := setOf(pod)
	if oldOK && (!ok || oldKey != key) {
		c.ctrl.Enqueue(oldKey, ev)
	}
	if ok {
		c.ctrl.Enqueue(key, ev)
		return
	}
	oldRef, ref := metav1.GetControllerOfNoCopy(old), metav1.GetControllerOfNoCopy(pod)
	refChanged := (oldRef == nil) != (ref == nil) || oldRef != nil && oldRef.UID != ref.UID
	if ref == nil && (refChanged || !labels.Equals(old.Labels, pod.Labels)) {
		c.enqueueMatching(pod, ev)
	}
}

// onPodDelete queues the pod's set, which recreates it under the same
// name (kube's deletePod).
func (c *Controller) onPodDelete(pod *corev1.Pod, ev *events.Event) {
	if key, ok := setOf(pod); ok {
		c.ctrl.Enqueue(key, ev)
	}
}

// enqueueMatching queues the sets in pod's namespace whose selector
// matches it (kube's getStatefulSetsForPod).
func (c *Controller) enqueueMatching(pod *corev1.Pod, ev *events.Event) {
	for _, set := range c.sets.ByIndex(consumer.IndexNamespace, pod.Namespace) {
		sel, err := metav1.LabelSelectorAsSelector(set.Spec.Selector)
		if err != nil || sel.Empty() || !sel.Matches(labels.Set(pod.Labels)) {
			continue
		}
		c.ctrl.Enqueue(consumer.KeyOf(set), ev)
	}
}
