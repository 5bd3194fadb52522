package job

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/events/consumer"
	"github.com/cairn-dev/cairn/services/controllers/writes"
	"github.com/cairn-dev/cairn/services/eventrecord"
)

// Name is the controller's name in logs and metrics.
const Name = "job"

// Component is the source of the controller's Events, as kube's.
const Component = "job-controller"

const (
	// DefaultJobPodFailureBackOff is the back-off after the first failure
	// (kube's DefaultJobPodFailureBackOff).
	DefaultJobPodFailureBackOff = 10 * time.Second
	// MaxJobPodFailureBackOff caps the back-off (kube's).
	MaxJobPodFailureBackOff = 6 * time.Minute
	// MaxUncountedPods caps the UIDs in status.uncountedTerminatedPods
	// (kube's 500).
	MaxUncountedPods = 500
	// MaxPodCreateDeletePerSync caps the pods created or deleted in one
	// round (kube's 500).
	MaxPodCreateDeletePerSync = 500
	// slowStartInitialBatchSize is the first batch of a slow start
	// (kube's controller.SlowStartInitialBatchSize).
	slowStartInitialBatchSize = 1
)

var (
	jobsResource   = batchv1.SchemeGroupVersion.WithResource("jobs")
	podsResource   = corev1.SchemeGroupVersion.WithResource("pods")
	controllerKind = batchv1.SchemeGroupVersion.WithKind("Job")
)

// Options configure the controller.
type Options struct {
	// Workers is the number of Jobs reconciled at once; 0 means 5 (kube's
	// --concurrent-job-syncs).
	Workers int
	// Clock is the time source (start and completion times, conditions,
	// back-off, deadlines); nil is time.Now.
	Clock func() time.Time
	// EventQPS and EventBurst limit the rate of Event writes (see package
	// eventrecord); 0 takes the controller defaults.
	EventQPS   float32
	EventBurst int
}

// Controller is the Job controller. Build it with New; its Manager runs it.
type Controller struct {
	log      *slog.Logger
	now      func() time.Time
	client   kubernetes.Interface
	jobs     *consumer.Cache[*batchv1.Job]
	pods     *consumer.Cache[*corev1.Pod]
	ctrl     *consumer.Controller
	recorder *eventrecord.Recorder

	expect     *expectations
	finalizers *finalizerExpectations
	backoff    *backoffStore
	// written is the Job status writes the cache has not shown yet.
	written *writes.Tracker
}

// New builds the controller on m's caches (jobs; pods Partitioned), client
// and recorder.
func New(m *consumer.Manager, opts Options) (*Controller, error) {
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	if opts.Workers <= 0 {
		opts.Workers = 5
	}
	log := m.Log().With("controller", Name)
	// Events carry real time: a test clock may stand still.
	recorder, err := eventrecord.ForManager(m, eventrecord.Config{Component: Component, Log: log},
		opts.EventQPS, opts.EventBurst)
	if err != nil {
		return nil, fmt.Errorf("job: new: %w", err)
	}
	jobs, err := consumer.CacheFor[*batchv1.Job](m, jobsResource)
	if err != nil {
		return nil, fmt.Errorf("job: new: %w", err)
	}
	pods, err := consumer.CacheFor[*corev1.Pod](m, podsResource, consumer.Partitioned())
	if err != nil {
		return nil, fmt.Errorf("job: new: %w", err)
	}
	c := &Controller{
		log: log, now: opts.Clock, client: m.Client(), jobs: jobs, pods: pods, recorder: recorder,
		expect:     newExpectations(opts.Clock),
		finalizers: newFinalizerExpectations(),
		backoff:    newBackoffStore(),
		written:    writes.New(),
	}
	c.ctrl, err = m.NewController(consumer.ControllerConfig{
		Name: Name, Reconciler: c, Workers: opts.Workers,
		WaitFor: []consumer.Syncer{jobs, pods},
	})
	if err != nil {
		return nil, fmt.Errorf("job: new: %w", err)
	}
	consumer.For(jobs, c.ctrl, nil)
	// Pods orphaned with the finalizer (a Job deleted with orphan
	// propagation, batch/v1's default) are released by a queue of pod keys.
	orphans, err := m.NewController(consumer.ControllerConfig{
		Name: Name + "-orphan-pods", Reconciler: consumer.ReconcilerFunc(c.syncOrphanPod),
		WaitFor: []consumer.Syncer{pods},
	})
	if err != nil {
		return nil, fmt.Errorf("job: new: %w", err)
	}
	consumer.For(pods, orphans, orphanKeys)
	pods.AddHandler(consumer.Handler[*corev1.Pod]{
		OnAdd:    c.onPodAdd,
		OnUpdate: c.onPodUpdate,
		OnDelete: c.onPodDelete,
	})
	return c, nil
}

// jobOf is the key and reference of the batch/v1 Job that controls pod.
func jobOf(pod *corev1.Pod) (string, *metav1.OwnerReference) {
	ref := metav1.GetControllerOfNoCopy(pod)
	if ref == nil || ref.Kind != controllerKind.Kind {
		return "", nil
	}
	if gv, err := schema.ParseGroupVersion(ref.APIVersion); err != nil || gv.Group != controllerKind.Group {
		return "", nil
	}
	return consumer.Key(pod.Namespace, ref.Name), ref
}

func (c *Controller) onPodAdd(pod *corev1.Pod, ev *events.Event) {
	key, ref := jobOf(pod)
	if ref == nil {
		return
	}
	if pod.DeletionTimestamp != nil {
		c.expect.deletionObserved(key, ref.UID)
	} else {
		c.expect.creationObserved(key, ref.UID)
	}
	if !hasJobTrackingFinalizer(pod) {
		c.finalizers.removalObserved(key, pod.UID)
	}
	c.ctrl.Enqueue(key, ev)
}

func (c *Controller) onPodUpdate(old, pod *corev1.Pod, ev *events.Event) {
	if old.ResourceVersion == pod.ResourceVersion {
		return
	}
	key, ref := jobOf(pod)
	if oldKey, oldRef := jobOf(old); oldRef != nil && (ref == nil || oldRef.UID != ref.UID) {
		c.ctrl.Enqueue(oldKey, ev)
	}
	if ref == nil {
		return
	}
	if pod.DeletionTimestamp != nil && old.DeletionTimestamp == nil {
		// Graceful deletion: the pod stops counting as active now.
		c.expect.deletionObserved(key, ref.UID)
	}
	if !hasJobTrackingFinalizer(pod) {
		c.finalizers.removalObserved(key, pod.UID)
	}
	c.ctrl.Enqueue(key, ev)
}

func (c *Controller) onPodDelete(pod *corev1.Pod, ev *events.Event) {
	key, ref := jobOf(pod)
	if ref == nil {
		return
	}
	if pod.DeletionTimestamp == nil {
		// Deleted without a graceful phase seen here.
		c.expect.deletionObserved(key, ref.UID)
	}
	c.finalizers.removalObserved(key, pod.UID)
	c.ctrl.Enqueue(key, ev)
}

// event records an Event about job; ctx carries the cause.
func (c *Controller) event(ctx context.Context, job *batchv1.Job, typ, reason, msg string) {
	c.recorder.Event(ctx, eventrecord.Ref(job, controllerKind), typ, reason, "", msg)
}

// orphanKeys queues a pod without a controller that still carries the
// tracking finalizer.
func orphanKeys(p *corev1.Pod) []string {
	if metav1.GetControllerOfNoCopy(p) != nil || !hasJobTrackingFinalizer(p) {
		return nil
	}
	return []string{consumer.KeyOf(p)}
}

// syncOrphanPod removes the tracking finalizer of an orphaned pod (kube's
// syncOrphanPod); pods that have a Job are the Job's round's.
func (c *Controller) syncOrphanPod(ctx context.Context, req consumer.Request) (consumer.Result, error) {
	ns, name := req.NamespaceName()
	pod, ok := c.pods.Get(ns, name)
	if !ok || len(orphanKeys(pod)) == 0 {
		return consumer.Result{}, nil
	}
	if err := c.removeFinalizer(ctx, pod); err != nil {
		return consumer.Result{}, fmt.Errorf("job: orphan pod %s: %w", req.Key, err)
	}
	return consumer.Result{}, nil
}
