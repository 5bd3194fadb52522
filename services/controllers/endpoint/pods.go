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
		c, err := consumer.CacheFor[*corev1.Pod](m, podsResource, consumer.Partitioned(), consumer.WithIndexers(podIndexers))
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

// pods is the pods of ns matching selector, and false while the namespace's
// cache has not synced yet (the caller tries again shortly: an empty list
// would remove every endpoint).
func (s *podSource) pods(ns string, selector map[string]string) ([]*corev1.Pod, bool, error) {
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
	for _, p := range candidates(c, ns, selector) {
		if selects(selector, p.Labels) {
			out = append(out, p)
		}
	}
	return out, true, nil
}

// indexPodLabel indexes pods by each of their labels: "ns/key=value".
const indexPodLabel = "endpoint/label"

func podLabels(p *corev1.Pod) []string {
	out := make([]string, 0, len(p.Labels))
	for k, v := range p.Labels {
		out = append(out, p.Namespace+"/"+k+"="+v)
	}
	return out
}

var podIndexers = map[string]consumer.IndexFunc[*corev1.Pod]{indexPodLabel: podLabels}

// candidates are the pods of ns that carry the rarest of selector's
// labels (every pod of ns for an empty selector): a sync reads the pods
// of its Service, not of its namespace, as a namespace may hold many.
func candidates(c *consumer.Cache[*corev1.Pod], ns string, selector map[string]string) []*corev1.Pod {
	if len(selector) == 0 {
		return c.ByIndex(consumer.IndexNamespace, ns)
	}
	var best []*corev1.Pod
	first := true
	for k, v := range selector {
		if got := c.ByIndex(indexPodLabel, ns+"/"+k+"="+v); first || len(got) < len(best) {
			best, first = got, false
		}
	}
	return best
}

// namespace is the cache of ns's pods, built (and run by the Manager) on
// first use.
func (s *podSource) namespace(ns string) (*consumer.Cache[*corev1.Pod], error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.byNS[ns]; ok {
		return c, nil
	}
	c, err := consumer.CacheFor[*corev1.Pod](s.m, podsResource, consumer.InNamespace(ns), consumer.WithIndexers(podIndexers))
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
		if selects(svc.Spec.Selector, pod.Labels) || (old != nil && selects(svc.Spec.Selector, old.Labels)) {
			sp.enqueue(consumer.KeyOf(svc), ev)
		}
	}
}

// selects reports whether a Service selector (labels that must all be
// equal) matches lbls, as labels.Set(selector).AsSelector() would,
// without building the selector: it runs for every Service of a
// namespace on every pod event there.
func selects(selector, lbls map[string]string) bool {
	for k, v := range selector {
		if got, ok := lbls[k]; !ok || got != v {
			return false
		}
	}
	return true
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
