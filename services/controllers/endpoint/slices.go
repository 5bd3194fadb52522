package endpoint

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/client-go/kubernetes"
	endpointslicerec "k8s.io/endpointslice"
	endpointsliceutil "k8s.io/endpointslice/util"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/events/consumer"
	"github.com/cairn-dev/cairn/services/eventrecord"
)

const (
	// SliceName is the EndpointSlice controller's name in logs.
	SliceName = "endpointslice"
	// SliceComponent is the source of its Events, as kube's.
	SliceComponent = "endpointslice-controller"
	// ManagedBy is the endpointslice.kubernetes.io/managed-by value of
	// the slices it keeps, as kube's.
	ManagedBy = "endpointslice-controller.k8s.io"
	// DefaultMaxEndpointsPerSlice is kube-controller-manager's
	// --max-endpoints-per-slice default.
	DefaultMaxEndpointsPerSlice = 100
	// notSyncedRetry is how soon a Service is tried again while the pods
	// of its namespace are still being listed.
	notSyncedRetry = 100 * time.Millisecond
)

const indexSliceService = "endpoint/service"

var (
	podsResource      = corev1.SchemeGroupVersion.WithResource("pods")
	servicesResource  = corev1.SchemeGroupVersion.WithResource("services")
	nodesResource     = corev1.SchemeGroupVersion.WithResource("nodes")
	slicesResource    = discoveryv1.SchemeGroupVersion.WithResource("endpointslices")
	endpointsResource = corev1.SchemeGroupVersion.WithResource("endpoints")
)

// SliceOptions configure the EndpointSlice controller.
type SliceOptions struct {
	// Workers is the number of Services synced at once; 0 means 5
	// (kube's --concurrent-service-endpoint-syncs).
	Workers int
	// MaxEndpointsPerSlice is kube's --max-endpoints-per-slice; 0 means
	// DefaultMaxEndpointsPerSlice.
	MaxEndpointsPerSlice int32
	// EventQPS and EventBurst limit Event writes (package eventrecord).
	EventQPS   float32
	EventBurst int
}

// SliceController keeps the EndpointSlices of every Service with a
// selector, with k8s.io/endpointslice's Reconciler (kube's own). Build
// it with NewSlices; its Manager runs it.
type SliceController struct {
	log      *slog.Logger
	client   kubernetes.Interface
	services *consumer.Cache[*corev1.Service]
	slices   *consumer.Cache[*discoveryv1.EndpointSlice]
	nodes    nodeLister
	pods     *podSource
	ctrl     *consumer.Controller
	recorder *eventrecord.Recorder
	max      int32
	// tracker holds the generations of the slices this controller wrote,
	// to tell a stale cache from a changed slice (kube's
	// EndpointSliceTracker); trigger computes the last-change trigger
	// time annotation.
	tracker *endpointsliceutil.EndpointSliceTracker
	trigger *endpointsliceutil.TriggerTimeTracker
	// unwritten keeps the trigger time of a failed reconcile for its
	// retry.
	unwritten *unwrittenTriggers
}

// NewSlices builds the EndpointSlice controller on m.
func NewSlices(m *consumer.Manager, opts SliceOptions) (*SliceController, error) {
	if opts.Workers <= 0 {
		opts.Workers = 5
	}
	if opts.MaxEndpointsPerSlice <= 0 {
		opts.MaxEndpointsPerSlice = DefaultMaxEndpointsPerSlice
	}
	c := &SliceController{log: m.Log().With("controller", SliceName), client: m.Client(), max: opts.MaxEndpointsPerSlice,
		tracker: endpointsliceutil.NewEndpointSliceTracker(), trigger: endpointsliceutil.NewTriggerTimeTracker(), unwritten: newUnwrittenTriggers()}
	var err error
	if c.recorder, err = eventrecord.ForManager(m, eventrecord.Config{Component: SliceComponent, Log: c.log}, opts.EventQPS, opts.EventBurst); err != nil {
		return nil, fmt.Errorf("endpointslice: new: %w", err)
	}
	if c.services, c.pods, err = serviceCaches(m, &c.ctrl); err != nil {
		return nil, fmt.Errorf("endpointslice: new: %w", err)
	}
	nodes, err := consumer.CacheFor[*corev1.Node](m, nodesResource)
	if err != nil {
		return nil, fmt.Errorf("endpointslice: new: %w", err)
	}
	c.nodes = nodeLister{nodes}
	if c.slices, err = consumer.CacheFor[*discoveryv1.EndpointSlice](m, slicesResource,
		consumer.WithIndexers(map[string]consumer.IndexFunc[*discoveryv1.EndpointSlice]{indexSliceService: sliceService})); err != nil {
		return nil, fmt.Errorf("endpointslice: new: %w", err)
	}
	c.ctrl, err = m.NewController(consumer.ControllerConfig{Name: SliceName, Reconciler: c, Workers: opts.Workers,
		WaitFor: append([]consumer.Syncer{c.services, nodes, c.slices}, c.pods.syncers()...)})
	if err != nil {
		return nil, fmt.Errorf("endpointslice: new: %w", err)
	}
	consumer.For(c.services, c.ctrl, nil)
	c.slices.AddHandler(consumer.Handler[*discoveryv1.EndpointSlice]{
		OnAdd:    c.onSliceAdd,
		OnUpdate: c.onSliceUpdate,
		OnDelete: c.onSliceDelete,
	})
	return c, nil
}

// serviceCaches are the Service cache and pod source of an endpoint
// controller whose Controller *ctrl will be: pod changes queue the
// Services that select the pods.
func serviceCaches(m *consumer.Manager, ctrl **consumer.Controller) (*consumer.Cache[*corev1.Service], *podSource, error) {
	services, err := consumer.CacheFor[*corev1.Service](m, servicesResource)
	if err != nil {
		return nil, nil, err
	}
	sp := servicePods{services: services, enqueue: func(key string, ev *events.Event) { (*ctrl).Enqueue(key, ev) }}
	pods, err := newPodSource(m, sp.handler())
	if err != nil {
		return nil, nil, err
	}
	return services, pods, nil
}

// sliceService indexes the slices this controller manages by their
// Service's key.
func sliceService(es *discoveryv1.EndpointSlice) []string {
	svc := es.Labels[discoveryv1.LabelServiceName]
	if svc == "" || es.Labels[discoveryv1.LabelManagedBy] != ManagedBy {
		return nil
	}
	return []string{consumer.Key(es.Namespace, svc)}
}

func managedSlice(es *discoveryv1.EndpointSlice) bool {
	return es.Labels[discoveryv1.LabelManagedBy] == ManagedBy
}

func (c *SliceController) queueForSlice(es *discoveryv1.EndpointSlice, ev *events.Event) {
	if svc := es.Labels[discoveryv1.LabelServiceName]; svc != "" {
		c.ctrl.Enqueue(consumer.Key(es.Namespace, svc), ev)
	}
}

// The slice handlers are kube's: a slice change queues its Service unless
// it is this controller's own write (the tracker expects its generation).
func (c *SliceController) onSliceAdd(es *discoveryv1.EndpointSlice, ev *events.Event) {
	if managedSlice(es) && c.tracker.ShouldSync(es) {
		c.queueForSlice(es, ev)
	}
}

func (c *SliceController) onSliceUpdate(old, es *discoveryv1.EndpointSlice, ev *events.Event) {
	if old.Labels[discoveryv1.LabelServiceName] != es.Labels[discoveryv1.LabelServiceName] {
		c.queueForSlice(es, ev)
		c.queueForSlice(old, ev)
		return
	}
	if managedSlice(old) != managedSlice(es) || (managedSlice(es) && c.tracker.ShouldSync(es)) {
		c.queueForSlice(es, ev)
	}
}

func (c *SliceController) onSliceDelete(es *discoveryv1.EndpointSlice, ev *events.Event) {
	if managedSlice(es) && c.tracker.Has(es) && !c.tracker.HandleDeletion(es) {
		c.queueForSlice(es, ev)
	}
}

// Reconcile syncs the slices of the Service req.Key, as kube's
// syncService: a Service gone or without a selector is left to the
// garbage collector (its slices' owner reference) or to whoever writes
// its slices.
func (c *SliceController) Reconcile(ctx context.Context, req consumer.Request) (consumer.Result, error) {
	ns, name := consumer.SplitKey(req.Key)
	svc, ok := c.services.Get(ns, name)
	if !ok {
		c.trigger.DeleteService(ns, name)
		c.unwritten.forget(req.Key)
		c.tracker.DeleteService(ns, name)
		return consumer.Result{}, nil
	}
	if !managed(svc) {
		return consumer.Result{}, nil
	}
	pods, synced, err := c.pods.pods(ns, svc.Spec.Selector)
	if err != nil {
		return consumer.Result{}, fmt.Errorf("endpointslice: %s: pods: %w", req.Key, err)
	}
	if !synced {
		return consumer.Result{RequeueAfter: notSyncedRetry}, nil
	}
	var slices []*discoveryv1.EndpointSlice
	for _, es := range c.slices.ByIndex(indexSliceService, req.Key) {
		if es.DeletionTimestamp == nil {
			slices = append(slices, es)
		}
	}
	if c.tracker.StaleSlices(svc, slices) {
		return consumer.Result{}, consumer.ExpectedError(fmt.Errorf("endpointslice: %s: %w", req.Key, errStale))
	}
	trigger := c.unwritten.triggerTime(req.Key, c.trigger.ComputeEndpointLastChangeTriggerTime(ns, svc, pods))
	rec := causalRecorder{c.recorder, ctx}
	r := endpointslicerec.NewReconciler(causalClient{c.client, ctx}, c.nodes, c.max, c.tracker, nil, rec, ManagedBy)
	err = r.Reconcile(logr.FromSlogHandler(c.log.Handler()), svc, pods, slices, trigger)
	c.unwritten.settle(req.Key, trigger, err == nil)
	if err != nil {
		rec.Eventf(svc, corev1.EventTypeWarning, "FailedToUpdateEndpointSlices",
			"Error updating Endpoint Slices for Service %s/%s: %v", ns, name, err)
		return consumer.Result{}, fmt.Errorf("endpointslice: %s: %w", req.Key, err)
	}
	return consumer.Result{}, nil
}
