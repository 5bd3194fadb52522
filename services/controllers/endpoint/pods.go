package endpoint

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/events/consumer"
)

// podSource gives a controller the pods of a namespace. A Service's pods
// may belong to any ReplicaSet, so the controllers cannot use the pod
// cache partitioned by the pods' controller (consumer.Partitioned): asking
// the Manager for that cache unpartitioned would make every sharded
// replica receive every pod event of the cluster. Instead, a sharded
// replica follows, with one cache each (consumer.InNamespace), only the
// namespaces in which it reconciles a Service with a selector; the server
// sends it nothing else. An unsharded Manager's shared pod cache already
// holds every pod, so it is used as it is.
//
// A namespace's cache, once followed, is kept while the process runs (the
// Manager does not remove caches).
type podSource struct {
	m       *consumer.Manager
	handler consumer.Handler[*corev1.Pod]
	mu      sync.Mutex
	shared  *consumer.Cache[*corev1.Pod] // unsharded: every pod
	byNS    map[string]*consumer.Cache[*corev1.Pod]
}

func newPodSource(m *consumer.Manager, h consumer.Handler[*corev1.Pod]) (*podSource, error) {
	s := &podSource{m: m, handler: h, byNS: map[string]*consumer.Cache[*corev1.Pod]{}}
	if m.Sharder() == nil {
		c, err := consumer.CacheFor[*corev1.Pod](m, podsResource, consumer.Partitioned())
		if err != nil {
			return nil, err
		}
		c.AddHandler(h)
		s.shared = c
	}
	return s, nil
}

// syncers are the caches a controller waits for at start: the shared
// one, if any; a namespace's cache is waited for by the reconcile that
// asks for it (pods).
func (s *podSource) syncers() []consumer.Syncer {
	if s.shared != nil {
		return []consumer.Syncer{s.shared}
	}
	return nil
}

// pods is the pods of ns matching sel, and false while the namespace's
// cache has not synced yet (the caller tries again shortly: an empty list
// would remove every endpoint).
func (s *podSource) pods(ns string, sel labels.Selector) ([]*corev1.Pod, bool, error) {
	c := s.shared
	if c == nil {
		var err error
		if c, err = s.namespace(ns); err != nil {
			return nil, false, err
		}
	}
	if !c.HasSynced() {
		return nil, false, nil
	}
	var out []*corev1.Pod
	for _, p := range c.ByIndex(consumer.IndexNamespace, ns) {
		if sel.Matches(labels.Set(p.Labels)) {
			out = append(out, p)
		}
	}
	return out, true, nil
}

// namespace is the cache of ns's pods, built (and run by the Manager) on
// first use.
func (s *podSource) namespace(ns string) (*consumer.Cache[*corev1.Pod], error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.byNS[ns]; ok {
		return c, nil
	}
	c, err := consumer.CacheFor[*corev1.Pod](s.m, podsResource, consumer.InNamespace(ns))
	if err != nil {
		return nil, err
	}
	c.AddHandler(s.handler)
	s.byNS[ns] = c
	return c, nil
}

// servicePods connects pod changes to the Services that select the pods.
type servicePods struct {
	services *consumer.Cache[*corev1.Service]
	enqueue  func(key string, ev *events.Event)
}

func (sp servicePods) handler() consumer.Handler[*corev1.Pod] {
	return consumer.Handler[*corev1.Pod]{
		OnAdd: func(p *corev1.Pod, ev *events.Event) { sp.queueFor(p, nil, ev) },
		OnUpdate: func(old, p *corev1.Pod, ev *events.Event) {
			if podChanged(old, p) {
				sp.queueFor(p, old, ev)
			}
		},
		OnDelete: func(p *corev1.Pod, ev *events.Event) { sp.queueFor(p, nil, ev) },
	}
}

// queueFor queues the Services whose selector matches pod or old.
func (sp servicePods) queueFor(pod, old *corev1.Pod, ev *events.Event) {
	for _, svc := range sp.services.ByIndex(consumer.IndexNamespace, pod.Namespace) {
		if !managed(svc) {
			continue
		}
		sel := labels.Set(svc.Spec.Selector).AsSelectorPreValidated()
		if sel.Matches(labels.Set(pod.Labels)) || (old != nil && sel.Matches(labels.Set(old.Labels))) {
			sp.enqueue(consumer.KeyOf(svc), ev)
		}
	}
}

// podChanged reports whether a pod update can change an endpoint: what
// kube's endpoint controllers compare (podEndpointsChanged) plus the
// labels.
func podChanged(old, p *corev1.Pod) bool {
	if old.ResourceVersion == p.ResourceVersion {
		return false
	}
	return !labels.Equals(old.Labels, p.Labels) ||
		(old.DeletionTimestamp == nil) != (p.DeletionTimestamp == nil) ||
		old.Spec.NodeName != p.Spec.NodeName || old.Spec.Hostname != p.Spec.Hostname || old.Spec.Subdomain != p.Spec.Subdomain ||
		old.Status.Phase != p.Status.Phase ||
		!equality.Semantic.DeepEqual(old.Status.PodIPs, p.Status.PodIPs) || old.Status.PodIP != p.Status.PodIP ||
		readyOf(old) != readyOf(p) ||
		!equality.Semantic.DeepEqual(old.Spec.Containers, p.Spec.Containers)
}

func readyOf(p *corev1.Pod) corev1.ConditionStatus {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status
		}
	}
	return ""
}

// managed reports whether the endpoint controllers keep svc's endpoints:
// a Service with a selector, not ExternalName, and not default/kubernetes
// (the apiserver's endpoint reconciler owns those).
func managed(svc *corev1.Service) bool {
	if svc.Spec.Selector == nil || svc.Spec.Type == corev1.ServiceTypeExternalName {
		return false
	}
	return !(svc.Namespace == metav1.NamespaceDefault && svc.Name == kubernetesService)
}
