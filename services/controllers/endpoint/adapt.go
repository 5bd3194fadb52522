package endpoint

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	discoveryclient "k8s.io/client-go/kubernetes/typed/discovery/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/cairn-dev/cairn/events/consumer"
	"github.com/cairn-dev/cairn/services/eventrecord"
)

// k8s.io/endpointslice's Reconciler writes with context.TODO() and records
// through a client-go EventRecorder, which takes no ctx. The adapters below
// give it, for one reconcile, a client and a recorder bound to that
// reconcile's ctx, so that its writes and Events carry the cause.

// nodeLister is the corelisters.NodeLister the Reconciler reads nodes'
// zones through, over the Manager's node cache.
type nodeLister struct{ nodes *consumer.Cache[*corev1.Node] }

var _ corelisters.NodeLister = nodeLister{}

func (l nodeLister) List(sel labels.Selector) ([]*corev1.Node, error) { return l.nodes.List(sel), nil }

func (l nodeLister) Get(name string) (*corev1.Node, error) {
	if n, ok := l.nodes.Get("", name); ok {
		return n, nil
	}
	return nil, apierrors.NewNotFound(corev1.Resource("node"), name)
}

// causalClient is client whose EndpointSlice writes use ctx, whatever ctx
// the caller passes.
type causalClient struct {
	kubernetes.Interface
	ctx context.Context
}

func (c causalClient) DiscoveryV1() discoveryclient.DiscoveryV1Interface {
	return causalDiscovery{c.Interface.DiscoveryV1(), c.ctx}
}

type causalDiscovery struct {
	discoveryclient.DiscoveryV1Interface
	ctx context.Context
}

func (d causalDiscovery) EndpointSlices(ns string) discoveryclient.EndpointSliceInterface {
	return causalSlices{d.DiscoveryV1Interface.EndpointSlices(ns), d.ctx}
}

type causalSlices struct {
	discoveryclient.EndpointSliceInterface
	ctx context.Context
}

func (s causalSlices) Create(_ context.Context, es *discoveryv1.EndpointSlice, o metav1.CreateOptions) (*discoveryv1.EndpointSlice, error) {
	return s.EndpointSliceInterface.Create(s.ctx, es, o)
}

func (s causalSlices) Update(_ context.Context, es *discoveryv1.EndpointSlice, o metav1.UpdateOptions) (*discoveryv1.EndpointSlice, error) {
	return s.EndpointSliceInterface.Update(s.ctx, es, o)
}

func (s causalSlices) Delete(_ context.Context, name string, o metav1.DeleteOptions) error {
	return s.EndpointSliceInterface.Delete(s.ctx, name, o)
}

// causalRecorder is a client-go EventRecorder writing through a cairn
// Recorder with ctx.
type causalRecorder struct {
	r   *eventrecord.Recorder
	ctx context.Context
}

var _ record.EventRecorder = causalRecorder{}

func (c causalRecorder) Event(obj runtime.Object, typ, reason, msg string) {
	m, ok := obj.(metav1.Object)
	if !ok {
		return
	}
	c.r.Event(c.ctx, eventrecord.Ref(m, kindOf(obj)), typ, reason, "", msg)
}

func (c causalRecorder) Eventf(obj runtime.Object, typ, reason, format string, args ...any) {
	c.Event(obj, typ, reason, fmt.Sprintf(format, args...))
}

func (c causalRecorder) AnnotatedEventf(obj runtime.Object, _ map[string]string, typ, reason, format string, args ...any) {
	c.Eventf(obj, typ, reason, format, args...)
}

// kindOf is obj's kind; objects decoded from the log have none set.
func kindOf(obj runtime.Object) schema.GroupVersionKind {
	switch obj.(type) {
	case *corev1.Service:
		return corev1.SchemeGroupVersion.WithKind("Service")
	case *corev1.Endpoints:
		return corev1.SchemeGroupVersion.WithKind("Endpoints")
	}
	return obj.GetObjectKind().GroupVersionKind()
}
