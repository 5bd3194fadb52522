package endpointmirror

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	endpointsliceutil "k8s.io/endpointslice/util"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/events/consumer"
	"github.com/cairn-dev/cairn/services/eventrecord"
)

const (
	// Name is the controller's name in logs.
	Name = "endpointslicemirroring"
	// Component is the source of its Events, as kube's.
	Component = "endpointslice-mirroring-controller"
	// ManagedBy is the endpointslice.kubernetes.io/managed-by value of
	// the slices it keeps, as kube's.
	ManagedBy = "endpointslicemirroring-controller.k8s.io"
	// DefaultMaxEndpointsPerSubset is kube-controller-manager's
	// --mirroring-max-endpoints-per-subset default.
	DefaultMaxEndpointsPerSubset = 1000
	// The reasons of its Warning Events, as kube's.
	ReasonInvalidIPAddress         = "InvalidIPAddress"
	ReasonTooManyAddressesToMirror = "TooManyAddressesToMirror"
	// leaderAnnotation marks the Endpoints of an old-style leader
	// election (client-go's LeaderElectionRecordAnnotationKey): not
	// addresses, never mirrored.
	leaderAnnotation = "control-plane.alpha.kubernetes.io/leader"
	indexEndpoints   = "endpointmirror/endpoints"
)

// errStale: the slice cache has not yet seen this controller's last write.
var errStale = errors.New("endpointmirror: EndpointSlice cache is out of date")

var (
	servicesResource  = corev1.SchemeGroupVersion.WithResource("services")
	endpointsResource = corev1.SchemeGroupVersion.WithResource("endpoints")
	slicesResource    = discoveryv1.SchemeGroupVersion.WithResource("endpointslices")
	endpointsKind     = corev1.SchemeGroupVersion.WithKind("Endpoints")
)

// Options configure the controller.
type Options struct {
	// Workers is the number of Endpoints mirrored at once; 0 means 5
	// (kube's --mirroring-concurrent-service-endpoint-syncs).
	Workers int
	// MaxEndpointsPerSubset is kube's
	// --mirroring-max-endpoints-per-subset; 0 means
	// DefaultMaxEndpointsPerSubset.
	MaxEndpointsPerSubset int
	EventQPS              float32
	EventBurst            int
}

// Controller mirrors the Endpoints of Services without a selector into
// EndpointSlices. Build it with New; its Manager runs it.
type Controller struct {
	log       *slog.Logger
	client    kubernetes.Interface
	services  *consumer.Cache[*corev1.Service]
	endpoints *consumer.Cache[*corev1.Endpoints]
	slices    *consumer.Cache[*discoveryv1.EndpointSlice]
	ctrl      *consumer.Controller
	recorder  *eventrecord.Recorder
	max       int
	// tracker holds the generations of the slices this controller wrote,
	// to tell a stale cache from a slice someone else changed.
	tracker *endpointsliceutil.EndpointSliceTracker
}

// New builds the controller on m.
func New(m *consumer.Manager, opts Options) (*Controller, error) {
	if opts.Workers <= 0 {
		opts.Workers = 5
	}
	if opts.MaxEndpointsPerSubset <= 0 {
		opts.MaxEndpointsPerSubset = DefaultMaxEndpointsPerSubset
	}
	c := &Controller{log: m.Log().With("controller", Name), client: m.Client(), max: opts.MaxEndpointsPerSubset,
		tracker: endpointsliceutil.NewEndpointSliceTracker()}
	var err error
	if c.recorder, err = eventrecord.ForManager(m, eventrecord.Config{Component: Component, Log: c.log}, opts.EventQPS, opts.EventBurst); err != nil {
		return nil, fmt.Errorf("endpointmirror: new: %w", err)
	}
	if c.services, err = consumer.CacheFor[*corev1.Service](m, servicesResource); err != nil {
		return nil, fmt.Errorf("endpointmirror: new: %w", err)
	}
	if c.endpoints, err = consumer.CacheFor[*corev1.Endpoints](m, endpointsResource); err != nil {
		return nil, fmt.Errorf("endpointmirror: new: %w", err)
	}
	if c.slices, err = consumer.CacheFor[*discoveryv1.EndpointSlice](m, slicesResource,
		consumer.WithIndexers(map[string]consumer.IndexFunc[*discoveryv1.EndpointSlice]{indexEndpoints: mirroredKeys})); err != nil {
		return nil, fmt.Errorf("endpointmirror: new: %w", err)
	}
	c.ctrl, err = m.NewController(consumer.ControllerConfig{Name: Name, Reconciler: c, Workers: opts.Workers,
		WaitFor: []consumer.Syncer{c.services, c.endpoints, c.slices}})
	if err != nil {
		return nil, fmt.Errorf("endpointmirror: new: %w", err)
	}
	c.watch()
	return c, nil
}

// mirroredKeys indexes the slices this controller keeps by the key of
// their Endpoints.
func mirroredKeys(es *discoveryv1.EndpointSlice) []string {
	if k := mirroredKey(es); k != "" {
		return []string{k}
	}
	return nil
}

func mirroredKey(es *discoveryv1.EndpointSlice) string {
	name := es.Labels[discoveryv1.LabelServiceName]
	if name == "" || !managed(es) {
		return ""
	}
	return consumer.Key(es.Namespace, name)
}

func managed(es *discoveryv1.EndpointSlice) bool {
	return es.Labels[discoveryv1.LabelManagedBy] == ManagedBy
}

// shouldMirror: the Endpoints are addresses someone means to publish:
// not marked skip-mirror (the apiserver's default/kubernetes), not a
// leader-election record.
func shouldMirror(ep *corev1.Endpoints) bool {
	if ep == nil || ep.Labels[discoveryv1.LabelSkipMirror] == "true" {
		return false
	}
	_, leader := ep.Annotations[leaderAnnotation]
	return !leader
}

// watch connects the caches to the queue with kube's handlers. On
// takeover (Resync) every Endpoints object and every mirrored slice is
// looked at again, so that slices left by a replica that died are found.
func (c *Controller) watch() {
	enqueue := func(key string, ev *events.Event) { c.ctrl.Enqueue(key, ev) }
	c.endpoints.AddHandler(consumer.Handler[*corev1.Endpoints]{
		OnAdd: func(ep *corev1.Endpoints, ev *events.Event) {
			if shouldMirror(ep) {
				enqueue(consumer.KeyOf(ep), ev)
			}
		},
		OnUpdate: func(old, ep *corev1.Endpoints, ev *events.Event) {
			if shouldMirror(old) || shouldMirror(ep) {
				enqueue(consumer.KeyOf(ep), ev)
			}
		},
		OnDelete: func(ep *corev1.Endpoints, ev *events.Event) {
			if shouldMirror(ep) {
				enqueue(consumer.KeyOf(ep), ev)
			}
		},
	})
	consumer.ResyncFrom(c.endpoints, c.ctrl, nil)
	selectorless := func(svc *corev1.Service, ev *events.Event) {
		if svc.Spec.Selector == nil {
			enqueue(consumer.KeyOf(svc), ev)
		}
	}
	c.services.AddHandler(consumer.Handler[*corev1.Service]{
		OnAdd: selectorless,
		OnUpdate: func(old, svc *corev1.Service, ev *events.Event) {
			if (old.Spec.Selector == nil) != (svc.Spec.Selector == nil) {
				enqueue(consumer.KeyOf(svc), ev)
			}
		},
		OnDelete: selectorless,
	})
	// A slice change queues its Endpoints unless it is this controller's
	// own write (the tracker expects its generation).
	bySlice := func(es *discoveryv1.EndpointSlice, ev *events.Event) {
		if name := es.Labels[discoveryv1.LabelServiceName]; name != "" {
			enqueue(consumer.Key(es.Namespace, name), ev)
		}
	}
	c.slices.AddHandler(consumer.Handler[*discoveryv1.EndpointSlice]{
		OnAdd: func(es *discoveryv1.EndpointSlice, ev *events.Event) {
			if managed(es) && c.tracker.ShouldSync(es) {
				bySlice(es, ev)
			}
		},
		OnUpdate: func(old, es *discoveryv1.EndpointSlice, ev *events.Event) {
			if old.Labels[discoveryv1.LabelServiceName] != es.Labels[discoveryv1.LabelServiceName] {
				bySlice(es, ev)
				bySlice(old, ev)
				return
			}
			if managed(old) != managed(es) || (managed(es) && c.tracker.ShouldSync(es)) {
				bySlice(es, ev)
			}
		},
		OnDelete: func(es *discoveryv1.EndpointSlice, ev *events.Event) {
			if managed(es) && c.tracker.Has(es) && !c.tracker.HandleDeletion(es) {
				bySlice(es, ev)
			}
		},
	})
	consumer.ResyncFrom(c.slices, c.ctrl, mirroredKeys)
}

var _ consumer.Reconciler = (*Controller)(nil)

// Reconcile mirrors the Endpoints req.Key, as kube's syncEndpoints: with
// no Endpoints to mirror (gone, skip-mirror, no Service, a Service with a
// selector) the slices mirrored for it are deleted.
func (c *Controller) Reconcile(ctx context.Context, req consumer.Request) (consumer.Result, error) {
	ns, name := consumer.SplitKey(req.Key)
	ep, ok := c.endpoints.Get(ns, name)
	if !ok || !shouldMirror(ep) {
		return consumer.Result{}, c.deleteMirrored(ctx, ns, name)
	}
	svc, ok := c.services.Get(ns, name)
	if !ok || svc.Spec.Selector != nil {
		return consumer.Result{}, c.deleteMirrored(ctx, ns, name)
	}
	mirrored := c.slices.ByIndex(indexEndpoints, req.Key)
	if c.tracker.StaleSlices(svc, mirrored) {
		return consumer.Result{}, consumer.ExpectedError(fmt.Errorf("endpointmirror: %s: %w", req.Key, errStale))
	}
	d := desiredOf(ep, c.max)
	ref := eventrecord.Ref(ep, endpointsKind)
	if d.invalid > 0 {
		c.recorder.Eventf(ctx, ref, corev1.EventTypeWarning, ReasonInvalidIPAddress, "",
			"Skipped %d invalid IP addresses when mirroring to EndpointSlices", d.invalid)
	}
	if d.skipped > d.invalid {
		c.recorder.Eventf(ctx, ref, corev1.EventTypeWarning, ReasonTooManyAddressesToMirror, "",
			"A max of %d addresses can be mirrored to EndpointSlices per Endpoints subset. %d addresses were skipped", c.max, d.skipped)
	}
	if err := c.write(ctx, ep, planFor(ep, mirrored, d, c.max)); err != nil {
		return consumer.Result{}, fmt.Errorf("endpointmirror: %s: %w", req.Key, err)
	}
	return consumer.Result{}, nil
}

// write is kube's finalize: creates (none while the Endpoints are being
// deleted, and none into a terminating namespace), updates, deletes.
func (c *Controller) write(ctx context.Context, ep *corev1.Endpoints, p plan) error {
	cli := c.client.DiscoveryV1().EndpointSlices(ep.Namespace)
	if ep.DeletionTimestamp == nil {
		for _, es := range p.create {
			out, err := cli.Create(ctx, es, metav1.CreateOptions{})
			if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
				return nil
			}
			if err != nil {
				return fmt.Errorf("create EndpointSlice: %w", err)
			}
			c.tracker.Update(out)
		}
	}
	for _, es := range p.update {
		out, err := cli.Update(ctx, es, metav1.UpdateOptions{})
		if err != nil {
			return fmt.Errorf("update EndpointSlice %s: %w", es.Name, err)
		}
		c.tracker.Update(out)
	}
	for _, es := range p.remove {
		if err := cli.Delete(ctx, es.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete EndpointSlice %s: %w", es.Name, err)
		}
		c.tracker.ExpectDeletion(es)
	}
	return nil
}

// deleteMirrored deletes the slices mirrored for Endpoints ns/name.
func (c *Controller) deleteMirrored(ctx context.Context, ns, name string) error {
	c.tracker.DeleteService(ns, name)
	var errs []error
	for _, es := range c.slices.ByIndex(indexEndpoints, consumer.Key(ns, name)) {
		err := c.client.DiscoveryV1().EndpointSlices(ns).Delete(ctx, es.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("endpointmirror: delete the slices of %s/%s: %w", ns, name, err)
	}
	return nil
}
