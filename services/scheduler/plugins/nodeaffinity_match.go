package plugins

import corev1 "k8s.io/api/core/v1"

// RequiredNodeAffinity compiles pod's nodeSelector and required node
// affinity into a predicate over nodes, the one the NodeAffinity filter
// applies (kube's nodeaffinity.GetRequiredNodeAffinity(pod).Match), for
// controllers that must decide as the scheduler will (the DaemonSet
// controller). An error is a requirement the scheduler cannot evaluate.
func RequiredNodeAffinity(pod *corev1.Pod) (func(node *corev1.Node) bool, error) {
	r, err := compileRequired(pod)
	if err != nil {
		return nil, err
	}
	return r.Match, nil
}

// NodeSelectorMatch compiles a NodeSelector (its terms ORed, as a
// PersistentVolume's spec.nodeAffinity.required) into a predicate over
// nodes, by the rules of the NodeAffinity filter (kube's
// corev1.NodeSelector matching). A nil selector matches every node; an
// error is a term the scheduler cannot evaluate.
func NodeSelectorMatch(sel *corev1.NodeSelector) (func(node *corev1.Node) bool, error) {
	if sel == nil {
		return func(*corev1.Node) bool { return true }, nil
	}
	r := requiredNodeAffinity{terms: make([]nodeSelectorTerm, 0, len(sel.NodeSelectorTerms))}
	for i := range sel.NodeSelectorTerms {
		t, err := compileTerm(&sel.NodeSelectorTerms[i])
		if err != nil {
			return nil, err
		}
		r.terms = append(r.terms, t)
	}
	if len(r.terms) == 0 {
		r.terms = []nodeSelectorTerm{{empty: true}}
	}
	return r.Match, nil
}
