package schemas

import (
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// What the apiserver's pods/eviction and the disruption controller both
// need to know of a PodDisruptionBudget.

// BudgetSelects reports whether pdb's selector matches pod, in policy/v1's
// terms: a null selector matches no pod, an empty one every pod of the
// namespace, an invalid one none.
func BudgetSelects(pdb *policyv1.PodDisruptionBudget, pod *corev1.Pod) bool {
	if pdb.Namespace != pod.Namespace || pdb.Spec.Selector == nil {
		return false
	}
	sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	return err == nil && sel.Matches(labels.Set(pod.Labels))
}

// SetDisruptionAllowed sets the budget's DisruptionAllowed condition from
// status.disruptionsAllowed (SufficientPods or InsufficientPods), as kube's
// pdb helper does.
func SetDisruptionAllowed(pdb *policyv1.PodDisruptionBudget) {
	cond := metav1.Condition{Type: policyv1.DisruptionAllowedCondition, Status: metav1.ConditionFalse,
		Reason: policyv1.InsufficientPodsReason, ObservedGeneration: pdb.Status.ObservedGeneration}
	if pdb.Status.DisruptionsAllowed > 0 {
		cond.Status, cond.Reason = metav1.ConditionTrue, policyv1.SufficientPodsReason
	}
	if pdb.Status.Conditions == nil {
		pdb.Status.Conditions = []metav1.Condition{}
	}
	apimeta.SetStatusCondition(&pdb.Status.Conditions, cond)
}

// PodReady reports whether pod's Ready condition is True.
func PodReady(pod *corev1.Pod) bool { return hasPodReadyCondition(pod.Status.Conditions) }
