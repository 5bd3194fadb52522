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
