package daemonset

import (
	"errors"
	"fmt"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/cairn-dev/cairn/services/scheduler/plugins"
)

// templateGenerationLabel is the pod label with the template generation
// the pod was made from (kube's extensions.DaemonSetTemplateGenerationKey).
const templateGenerationLabel = "pod-template-generation"

// Taint keys of the default DaemonSet tolerations (kube's
// v1.TaintNode*).
const (
	taintNotReady           = "node.kubernetes.io/not-ready"
	taintUnreachable        = "node.kubernetes.io/unreachable"
	taintDiskPressure       = "node.kubernetes.io/disk-pressure"
	taintMemoryPressure     = "node.kubernetes.io/memory-pressure"
	taintPIDPressure        = "node.kubernetes.io/pid-pressure"
	taintUnschedulable      = "node.kubernetes.io/unschedulable"
	taintNetworkUnavailable = "node.kubernetes.io/network-unavailable"
)

// addDaemonTolerations adds kube's default DaemonSet tolerations to spec,
// replacing tolerations of the same key and effect (kube's
// AddOrUpdateDaemonPodTolerations): daemon pods stay on nodes that are not
// ready or unreachable, and are placed on nodes under pressure or
// cordoned; host-network pods also on nodes whose network is not set up.
func addDaemonTolerations(spec *corev1.PodSpec) {
	add := func(key string, effect corev1.TaintEffect) {
		t := corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists, Effect: effect}
		for i := range spec.Tolerations {
			if spec.Tolerations[i].Key == key && spec.Tolerations[i].Effect == effect {
				spec.Tolerations[i] = t
				return
			}
		}
		spec.Tolerations = append(spec.Tolerations, t)
	}
	add(taintNotReady, corev1.TaintEffectNoExecute)
	add(taintUnreachable, corev1.TaintEffectNoExecute)
	add(taintDiskPressure, corev1.TaintEffectNoSchedule)
	add(taintMemoryPressure, corev1.TaintEffectNoSchedule)
	add(taintPIDPressure, corev1.TaintEffectNoSchedule)
	add(taintUnschedulable, corev1.TaintEffectNoSchedule)
	if spec.HostNetwork {
		add(taintNetworkUnavailable, corev1.TaintEffectNoSchedule)
	}
}

// placement is the compiled scheduling constraints of one DaemonSet's
// pods: its template with the default tolerations, and its required node
// affinity.
type placement struct {
	nodeName    string
	tolerations []corev1.Toleration
	affinity    func(*corev1.Node) bool
}

func newPlacement(ds *appsv1.DaemonSet) (*placement, error) {
	pod := &corev1.Pod{Spec: *ds.Spec.Template.Spec.DeepCopy()}
	addDaemonTolerations(&pod.Spec)
	match, err := plugins.RequiredNodeAffinity(pod)
	if err != nil {
		return nil, fmt.Errorf("daemonset: %s/%s: node affinity: %w", ds.Namespace, ds.Name, err)
	}
	return &placement{nodeName: pod.Spec.NodeName, tolerations: pod.Spec.Tolerations, affinity: match}, nil
}

// shouldRun reports whether a daemon pod should be placed on node
// (shouldRun) and whether one that is there may stay (shouldContinue), as
// kube's nodeShouldRunDaemonPod: the node must be the template's nodeName
// if it names one and match the node selector and required affinity; an
// untolerated NoSchedule taint keeps new pods off, an untolerated
// NoExecute taint evicts them too.
func (p *placement) shouldRun(node *corev1.Node) (shouldRun, shouldContinue bool) {
	if p.nodeName != "" && p.nodeName != node.Name {
		return false, false
	}
	if !p.affinity(node) {
		return false, false
	}
	noSchedule, noExecute := false, false
	for i := range node.Spec.Taints {
		taint := &node.Spec.Taints[i]
		if taint.Effect != corev1.TaintEffectNoSchedule && taint.Effect != corev1.TaintEffectNoExecute {
			continue
		}
		if tolerated(p.tolerations, taint) {
			continue
		}
		if taint.Effect == corev1.TaintEffectNoExecute {
			noExecute = true
		} else {
			noSchedule = true
		}
	}
	switch {
	case noExecute:
		return false, false
	case noSchedule:
		return false, true
	}
	return true, true
}

func tolerated(tols []corev1.Toleration, taint *corev1.Taint) bool {
	for i := range tols {
		if tols[i].ToleratesTaint(klog.Background(), taint, false) {
			return true
		}
	}
	return false
}

// nodeAffinityFor is affinity with its required node affinity replaced by
// the one term `metadata.name In [node]`, so the default scheduler binds
// the pod to node and nowhere else (kube's
// ReplaceDaemonSetPodNodeNameNodeAffinity). Other required terms are
// dropped: the controller placed the pod on a node that satisfies them.
func nodeAffinityFor(affinity *corev1.Affinity, node string) *corev1.Affinity {
	sel := &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
		MatchFields: []corev1.NodeSelectorRequirement{{Key: metav1.ObjectNameField, Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
	}}}
	if affinity == nil {
		return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: sel}}
	}
	out := affinity.DeepCopy()
	if out.NodeAffinity == nil {
		out.NodeAffinity = &corev1.NodeAffinity{}
	}
	out.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution = sel
	return out
}

// errNoTarget is a pod that names no node: neither bound nor carrying the
// metadata.name affinity term the controller sets.
var errNoTarget = errors.New("daemonset: pod has no target node")

// targetNode is the node pod is bound to or meant for (kube's
// GetTargetNodeName).
func targetNode(pod *corev1.Pod) (string, error) {
	if pod.Spec.NodeName != "" {
		return pod.Spec.NodeName, nil
	}
	a := pod.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return "", errNoTarget
	}
	for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		for _, f := range term.MatchFields {
			if f.Key == metav1.ObjectNameField && f.Operator == corev1.NodeSelectorOpIn && len(f.Values) == 1 {
				return f.Values[0], nil
			}
		}
	}
	return "", errNoTarget
}

// templateGeneration is the DaemonSet's deprecated template generation
// annotation, nil if absent or unreadable (kube's GetTemplateGeneration).
func templateGeneration(ds *appsv1.DaemonSet) *int64 {
	v, ok := ds.Annotations[appsv1.DeprecatedTemplateGeneration]
	if !ok {
		return nil
	}
	g, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return nil
	}
	return &g
}

// isPodUpdated reports whether pod is of the DaemonSet's current template:
// its controller-revision-hash is hash, or its pod-template-generation is
// the DaemonSet's (kube's IsPodUpdated).
func isPodUpdated(pod *corev1.Pod, hash string, generation *int64) bool {
	genMatches := generation != nil && pod.Labels[templateGenerationLabel] == strconv.FormatInt(*generation, 10)
	hashMatches := hash != "" && pod.Labels[appsv1.DefaultDaemonSetUniqueLabelKey] == hash
	return hashMatches || genMatches
}

// podTemplate is the template of the DaemonSet's new pods: its own, with
// the default tolerations and the pod-template-generation and
// controller-revision-hash labels (kube's CreatePodTemplate).
func podTemplate(ds *appsv1.DaemonSet, generation *int64, hash string) *corev1.PodTemplateSpec {
	t := ds.Spec.Template.DeepCopy()
	addDaemonTolerations(&t.Spec)
	if t.Labels == nil {
		t.Labels = map[string]string{}
	}
	if generation != nil {
		t.Labels[templateGenerationLabel] = strconv.FormatInt(*generation, 10)
	}
	if hash != "" {
		t.Labels[appsv1.DefaultDaemonSetUniqueLabelKey] = hash
	}
	return t
}
