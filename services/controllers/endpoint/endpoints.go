package endpoint

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	endpointslicerec "k8s.io/endpointslice"
	endpointsliceutil "k8s.io/endpointslice/util"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/events/consumer"
	"github.com/cairn-dev/cairn/services/eventrecord"
)

const (
	// EndpointsName is the Endpoints controller's name in logs.
	EndpointsName = "endpoints"
	// EndpointsComponent is the source of its Events, as kube's.
	EndpointsComponent = "endpoint-controller"
	// MaxEndpointsCapacity is how many addresses an Endpoints object
	// holds at most; beyond it kube truncates and sets the
	// endpoints.kubernetes.io/over-capacity annotation.
	MaxEndpointsCapacity = 1000
	truncated            = "truncated"
)

// errStale: the cache has not yet seen this controller's last write.
var errStale = errors.New("endpoint: cache is out of date")

// EndpointsOptions configure the Endpoints controller.
type EndpointsOptions struct {
	// Workers is the number of Services synced at once; 0 means 5
	// (kube's --concurrent-endpoint-syncs).
	Workers    int
	EventQPS   float32
	EventBurst int
}

// EndpointsController keeps the core/v1 Endpoints of every Service with
// a selector, as kube's endpoint controller (pkg/controller/endpoint),
// for kubectl get endpoints and describe svc. Build it with NewEndpoints;
// its Manager runs it.
type EndpointsController struct {
	log       *slog.Logger
	client    kubernetes.Interface
	services  *consumer.Cache[*corev1.Service]
	endpoints *consumer.Cache[*corev1.Endpoints]
	pods      *podSource
	ctrl      *consumer.Controller
	recorder  *eventrecord.Recorder
	trigger   *endpointsliceutil.TriggerTimeTracker
	unwritten *unwrittenTriggers
	stale     *staleTracker
}

// NewEndpoints builds the Endpoints controller on m.
func NewEndpoints(m *consumer.Manager, opts EndpointsOptions) (*EndpointsController, error) {
	if opts.Workers <= 0 {
		opts.Workers = 5
	}
	c := &EndpointsController{log: m.Log().With("controller", EndpointsName), client: m.Client(),
		trigger: endpointsliceutil.NewTriggerTimeTracker(), unwritten: newUnwrittenTriggers(), stale: newStaleTracker()}
	var err error
	if c.recorder, err = eventrecord.ForManager(m, eventrecord.Config{Component: EndpointsComponent, Log: c.log}, opts.EventQPS, opts.EventBurst); err != nil {
		return nil, fmt.Errorf("endpoints: new: %w", err)
	}
	if c.services, c.pods, err = serviceCaches(m, &c.ctrl); err != nil {
		return nil, fmt.Errorf("endpoints: new: %w", err)
	}
	if c.endpoints, err = consumer.CacheFor[*corev1.Endpoints](m, endpointsResource); err != nil {
		return nil, fmt.Errorf("endpoints: new: %w", err)
	}
	c.ctrl, err = m.NewController(consumer.ControllerConfig{Name: EndpointsName, Reconciler: c, Workers: opts.Workers,
		WaitFor: append([]consumer.Syncer{c.services, c.endpoints}, c.pods.syncers()...)})
	if err != nil {
		return nil, fmt.Errorf("endpoints: new: %w", err)
	}
	consumer.For(c.services, c.ctrl, nil)
	// Endpoints left by a Service deleted while no replica ran are found
	// at start and on takeover (kube's checkLeftoverEndpoints). Of the
	// changes made by others only deletes are watched, as kube's
	// onEndpointsDelete: a Service's Endpoints deleted are written again.
	consumer.ResyncFrom(c.endpoints, c.ctrl, nil)
	c.endpoints.AddHandler(consumer.Handler[*corev1.Endpoints]{
		OnDelete: func(ep *corev1.Endpoints, ev *events.Event) { c.ctrl.Enqueue(consumer.KeyOf(ep), ev) },
	})
	return c, nil
}

// Reconcile syncs the Endpoints of the Service req.Key, as kube's
// syncService.
func (c *EndpointsController) Reconcile(ctx context.Context, req consumer.Request) (consumer.Result, error) {
	ns, name := consumer.SplitKey(req.Key)
	svc, ok := c.services.Get(ns, name)
	if !ok {
		if ns == metav1.NamespaceDefault && name == kubernetesService {
			return consumer.Result{}, nil
		}
		if ep, ok := c.endpoints.Get(ns, name); ok && ep.Annotations[leaderAnnotation] != "" {
			return consumer.Result{}, nil
		}
		err := c.client.CoreV1().Endpoints(ns).Delete(ctx, name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return consumer.Result{}, fmt.Errorf("endpoints: delete %s: %w", req.Key, err)
		}
		c.trigger.DeleteService(ns, name)
		c.unwritten.forget(req.Key)
		c.stale.forget(req.Key)
		return consumer.Result{}, nil
	}
	if !managed(svc) {
		return consumer.Result{}, nil
	}
	pods, synced, err := c.pods.pods(ns, svc.Spec.Selector)
	if err != nil {
		return consumer.Result{}, fmt.Errorf("endpoints: %s: pods: %w", req.Key, err)
	}
	if !synced {
		return consumer.Result{RequeueAfter: notSyncedRetry}, nil
	}
	trigger := c.unwritten.triggerTime(req.Key, c.trigger.ComputeEndpointLastChangeTriggerTime(ns, svc, pods))
	subsets := desiredSubsets(svc, pods)
	written := false
	defer func() { c.unwritten.settle(req.Key, trigger, written) }()

	current, ok := c.endpoints.Get(ns, name)
	if !ok {
		current = &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: svc.Labels}}
	} else if c.stale.isStale(req.Key, current.ResourceVersion) {
		return consumer.Result{}, consumer.ExpectedError(fmt.Errorf("endpoints: %s at %s: %w", req.Key, current.ResourceVersion, errStale))
	}
	create := current.ResourceVersion == ""
	if !create && upToDate(current, svc, subsets) {
		written = true
		return consumer.Result{}, nil
	}
	want := desiredEndpoints(current, svc, subsets, trigger)
	var updated *corev1.Endpoints
	if create {
		_, err = c.client.CoreV1().Endpoints(ns).Create(ctx, want, metav1.CreateOptions{})
	} else {
		updated, err = c.client.CoreV1().Endpoints(ns).Update(ctx, want, metav1.UpdateOptions{})
	}
	if err != nil {
		if create && apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
			return consumer.Result{}, nil
		}
		rec := causalRecorder{c.recorder, ctx}
		if create {
			rec.Eventf(want, corev1.EventTypeWarning, "FailedToCreateEndpoint", "Failed to create endpoint for service %v/%v: %v", ns, name, err)
		} else {
			rec.Eventf(want, corev1.EventTypeWarning, "FailedToUpdateEndpoint", "Failed to update endpoint %v/%v: %v", ns, name, err)
		}
		return consumer.Result{}, fmt.Errorf("endpoints: write %s: %w", req.Key, err)
	}
	written = true
	if updated != nil && updated.ResourceVersion != current.ResourceVersion {
		c.stale.mark(req.Key, current.ResourceVersion)
	}
	return consumer.Result{}, nil
}

// leaderAnnotation marks the Endpoints of an old-style leader election,
// which have no Service and are not deleted (kube's
// resourcelock.LeaderElectionRecordAnnotationKey).
const leaderAnnotation = "control-plane.alpha.kubernetes.io/leader"

const kubernetesService = "kubernetes"

// desiredSubsets are the subsets of svc's Endpoints for pods, as kube's
// syncService builds them, repacked.
func desiredSubsets(svc *corev1.Service, pods []*corev1.Pod) []corev1.EndpointSubset {
	var subsets []corev1.EndpointSubset
	for _, pod := range pods {
		if !endpointsliceutil.ShouldPodBeInEndpoints(pod, svc.Spec.PublishNotReadyAddresses) {
			continue
		}
		epa, ok := podAddress(svc, pod)
		if !ok {
			continue
		}
		if endpointsliceutil.ShouldSetHostname(pod, svc) {
			epa.Hostname = pod.Spec.Hostname
		}
		if len(svc.Spec.Ports) == 0 {
			// A headless Service may have no ports.
			if svc.Spec.ClusterIP == corev1.ClusterIPNone {
				subsets = addSubset(subsets, pod, epa, nil, svc.Spec.PublishNotReadyAddresses)
			}
			continue
		}
		for i := range svc.Spec.Ports {
			sp := &svc.Spec.Ports[i]
			port, err := endpointslicerec.FindPort(pod, sp)
			if err != nil {
				continue // a named port this pod does not have
			}
			epp := &corev1.EndpointPort{Name: sp.Name, Port: int32(port), Protocol: sp.Protocol, AppProtocol: sp.AppProtocol}
			subsets = addSubset(subsets, pod, epa, epp, svc.Spec.PublishNotReadyAddresses)
		}
	}
	return repackSubsets(subsets)
}

func addSubset(subsets []corev1.EndpointSubset, pod *corev1.Pod, epa corev1.EndpointAddress, epp *corev1.EndpointPort, tolerateUnready bool) []corev1.EndpointSubset {
	ports := []corev1.EndpointPort{}
	if epp != nil {
		ports = append(ports, *epp)
	}
	if tolerateUnready || endpointsliceutil.IsPodReady(pod) {
		return append(subsets, corev1.EndpointSubset{Addresses: []corev1.EndpointAddress{epa}, Ports: ports})
	}
	return append(subsets, corev1.EndpointSubset{NotReadyAddresses: []corev1.EndpointAddress{epa}, Ports: ports})
}

// podAddress is pod's address in the Service's IP family, as kube's
// podToEndpointAddressForService.
func podAddress(svc *corev1.Service, pod *corev1.Pod) (corev1.EndpointAddress, bool) {
	v6 := false
	switch {
	case len(svc.Spec.IPFamilies) > 0:
		v6 = svc.Spec.IPFamilies[0] == corev1.IPv6Protocol
	case svc.Spec.ClusterIP != "" && svc.Spec.ClusterIP != corev1.ClusterIPNone:
		v6 = isIPv6(svc.Spec.ClusterIP)
	default:
		v6 = isIPv6(pod.Status.PodIP)
	}
	for _, ip := range pod.Status.PodIPs {
		if isIPv6(ip.IP) == v6 {
			node := pod.Spec.NodeName
			return corev1.EndpointAddress{IP: ip.IP, NodeName: &node,
				TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID}}, true
		}
	}
	return corev1.EndpointAddress{}, false
}

func isIPv6(s string) bool {
	a, err := netip.ParseAddr(s)
	return err == nil && a.Is6() && !a.Is4In6()
}

// desiredEndpoints is current with subsets, svc's labels (and the
// headless label) and kube's annotations.
func desiredEndpoints(current *corev1.Endpoints, svc *corev1.Service, subsets []corev1.EndpointSubset, trigger time.Time) *corev1.Endpoints {
	ep := current.DeepCopy()
	ep.Subsets = subsets
	ep.Labels = map[string]string{}
	for k, v := range svc.Labels {
		ep.Labels[k] = v
	}
	if svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == corev1.ClusterIPNone {
		ep.Labels[corev1.IsHeadlessService] = ""
	}
	if ep.Annotations == nil {
		ep.Annotations = map[string]string{}
	}
	if !trigger.IsZero() {
		ep.Annotations[corev1.EndpointsLastChangeTriggerTime] = trigger.UTC().Format(time.RFC3339Nano)
	} else {
		delete(ep.Annotations, corev1.EndpointsLastChangeTriggerTime)
	}
	if truncateEndpoints(ep) {
		ep.Annotations[corev1.EndpointsOverCapacity] = truncated
	} else {
		delete(ep.Annotations, corev1.EndpointsOverCapacity)
	}
	return ep
}
