package framework

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/cairn-dev/cairn/schemas/fit"
)

// AffinityTerm is a parsed PodAffinityTerm: the pods it selects (namespaces
// and label selector) and the topology key whose domains it speaks about.
type AffinityTerm struct {
	// Namespaces the term selects pods from; with AllNamespaces, every one.
	Namespaces    map[string]struct{}
	AllNamespaces bool
	Selector      labels.Selector
	TopologyKey   string
}

// WeightedAffinityTerm is a preferred term with its weight.
type WeightedAffinityTerm struct {
	AffinityTerm
	Weight int32
}

// Matches reports whether pod is one of the pods the term selects.
func (t *AffinityTerm) Matches(pod *corev1.Pod) bool {
	if !t.AllNamespaces {
		if _, ok := t.Namespaces[pod.Namespace]; !ok {
			return false
		}
	}
	return t.Selector.Matches(labels.Set(pod.Labels))
}

// HostPort is one host port a pod uses.
type HostPort struct {
	IP       string
	Protocol corev1.Protocol
	Port     int32
}

// PodInfo is a pod with what the plugins need precomputed once: its
// priority, requests and parsed affinity terms. It is immutable once built
// and shared between the queue, the cache and the plugins.
type PodInfo struct {
	Pod *corev1.Pod
	// Key is "namespace/name".
	Key string
	// Priority is the pod's priority (spec.priority, or resolved from its
	// PriorityClass by the caller of NewPodInfo).
	Priority int32
	// Requests is what the pod requests (see PodRequests); NonZero is the
	// same with the scoring defaults.
	Requests, NonZero fit.Resources

	RequiredAffinity      []AffinityTerm
	RequiredAntiAffinity  []AffinityTerm
	PreferredAffinity     []WeightedAffinityTerm
	PreferredAntiAffinity []WeightedAffinityTerm
	HostPorts             []HostPort
	// ParseError is set when a label selector of the pod does not parse;
	// the pod is then unschedulable.
	ParseError error
}

// NewPodInfo builds a PodInfo. priority is used when spec.priority is nil
// (the caller resolves priorityClassName); otherwise spec.priority wins.
func NewPodInfo(pod *corev1.Pod, priority int32) *PodInfo {
	pi := &PodInfo{Pod: pod, Key: pod.Namespace + "/" + pod.Name, Priority: priority}
	if pod.Spec.Priority != nil {
		pi.Priority = *pod.Spec.Priority
	}
	pi.Requests, pi.NonZero = PodRequests(pod)
	if a := pod.Spec.Affinity; a != nil {
		if pa := a.PodAffinity; pa != nil {
			pi.RequiredAffinity = pi.terms(pa.RequiredDuringSchedulingIgnoredDuringExecution)
			pi.PreferredAffinity = pi.weightedTerms(pa.PreferredDuringSchedulingIgnoredDuringExecution)
		}
		if pa := a.PodAntiAffinity; pa != nil {
			pi.RequiredAntiAffinity = pi.terms(pa.RequiredDuringSchedulingIgnoredDuringExecution)
			pi.PreferredAntiAffinity = pi.weightedTerms(pa.PreferredDuringSchedulingIgnoredDuringExecution)
		}
	}
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.HostPort <= 0 {
				continue
			}
			proto := p.Protocol
			if proto == "" {
				proto = corev1.ProtocolTCP
			}
			ip := p.HostIP
			if ip == "" {
				ip = "0.0.0.0"
			}
			pi.HostPorts = append(pi.HostPorts, HostPort{IP: ip, Protocol: proto, Port: p.HostPort})
		}
	}
	return pi
}

// HasAffinity reports whether the pod has any pod (anti-)affinity term.
func (pi *PodInfo) HasAffinity() bool {
	return len(pi.RequiredAffinity)+len(pi.RequiredAntiAffinity)+
		len(pi.PreferredAffinity)+len(pi.PreferredAntiAffinity) > 0
}

func (pi *PodInfo) terms(in []corev1.PodAffinityTerm) []AffinityTerm {
	out := make([]AffinityTerm, 0, len(in))
	for i := range in {
		t, err := newAffinityTerm(pi.Pod, &in[i])
		if err != nil {
			pi.ParseError = err
			continue
		}
		out = append(out, t)
	}
	return out
}

func (pi *PodInfo) weightedTerms(in []corev1.WeightedPodAffinityTerm) []WeightedAffinityTerm {
	out := make([]WeightedAffinityTerm, 0, len(in))
	for i := range in {
		t, err := newAffinityTerm(pi.Pod, &in[i].PodAffinityTerm)
		if err != nil {
			pi.ParseError = err
			continue
		}
		out = append(out, WeightedAffinityTerm{AffinityTerm: t, Weight: in[i].Weight})
	}
	return out
}

// newAffinityTerm parses a term. Its namespaces are the listed ones, or the
// pod's own when neither namespaces nor a namespaceSelector is given; an
// empty namespaceSelector ({}) selects every namespace. A non-empty
// namespaceSelector would need namespace labels, which the scheduler does
// not track: such a term selects only the listed namespaces.
func newAffinityTerm(pod *corev1.Pod, t *corev1.PodAffinityTerm) (AffinityTerm, error) {
	sel, err := metav1.LabelSelectorAsSelector(t.LabelSelector)
	if err != nil {
		return AffinityTerm{}, fmt.Errorf("framework: pod %s/%s: affinity term: %w", pod.Namespace, pod.Name, err)
	}
	at := AffinityTerm{Selector: sel, TopologyKey: t.TopologyKey, Namespaces: map[string]struct{}{}}
	if len(t.Namespaces) == 0 && t.NamespaceSelector == nil {
		at.Namespaces[pod.Namespace] = struct{}{}
	}
	for _, ns := range t.Namespaces {
		at.Namespaces[ns] = struct{}{}
	}
	if t.NamespaceSelector != nil && len(t.NamespaceSelector.MatchLabels) == 0 && len(t.NamespaceSelector.MatchExpressions) == 0 {
		at.AllNamespaces = true
	}
	return at, nil
}
