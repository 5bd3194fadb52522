package replicaset

import (
	"reflect"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/cairn-dev/cairn/schemas"
)

// calculateStatus is rs's status given the pods it controls (all of them
// and the active ones) and the error of this round's creates or deletes
// (kube's calculateStatus). availableIn > 0 is how long until the next
// ready pod becomes available (minReadySeconds), so the status can be
// refreshed then.
func calculateStatus(rs *appsv1.ReplicaSet, pods, active []*corev1.Pod, manageErr error, now time.Time) (st appsv1.ReplicaSetStatus, availableIn time.Duration) {
	st = *rs.Status.DeepCopy()
	st.Replicas = int32(len(active))
	st.ObservedGeneration = rs.Generation
	tmpl := labels.Set(rs.Spec.Template.Labels).AsSelectorPreValidated()
	var labeled, ready, avail int32
	for _, p := range active {
		if tmpl.Matches(labels.Set(p.Labels)) {
			labeled++
		}
		if schemas.PodReady(p) {
			ready++
		}
		ok, after := available(p, rs.Spec.MinReadySeconds, now)
		if ok {
			avail++
		} else if after > 0 && (availableIn == 0 || after < availableIn) {
			availableIn = after
		}
	}
	st.FullyLabeledReplicas, st.ReadyReplicas, st.AvailableReplicas = labeled, ready, avail
	var terminating int32
	for _, p := range pods {
		if p.DeletionTimestamp != nil {
			terminating++
		}
	}
	st.TerminatingReplicas = &terminating

	failed := condition(st, appsv1.ReplicaSetReplicaFailure)
	switch {
	case manageErr != nil && failed == nil:
		reason := ""
		if diff := len(active) - int(ptrOr(rs.Spec.Replicas, 1)); diff < 0 {
			reason = "FailedCreate"
		} else if diff > 0 {
			reason = "FailedDelete"
		}
		st.Conditions = append(st.Conditions, appsv1.ReplicaSetCondition{
			Type: appsv1.ReplicaSetReplicaFailure, Status: corev1.ConditionTrue,
			LastTransitionTime: metav1.NewTime(now), Reason: reason, Message: manageErr.Error(),
		})
	case manageErr == nil && failed != nil:
		var keep []appsv1.ReplicaSetCondition
		for _, c := range st.Conditions {
			if c.Type != appsv1.ReplicaSetReplicaFailure {
				keep = append(keep, c)
			}
		}
		st.Conditions = keep
	}
	return st, availableIn
}

func condition(st appsv1.ReplicaSetStatus, t appsv1.ReplicaSetConditionType) *appsv1.ReplicaSetCondition {
	for i := range st.Conditions {
		if st.Conditions[i].Type == t {
			return &st.Conditions[i]
		}
	}
	return nil
}

// statusEqual compares statuses as they are stored (a missing
// terminatingReplicas is 0).
func statusEqual(a, b appsv1.ReplicaSetStatus) bool {
	if ptrOr(a.TerminatingReplicas, 0) != ptrOr(b.TerminatingReplicas, 0) {
		return false
	}
	a.TerminatingReplicas, b.TerminatingReplicas = nil, nil
	if len(a.Conditions) == 0 && len(b.Conditions) == 0 {
		a.Conditions, b.Conditions = nil, nil
	}
	return reflect.DeepEqual(a, b)
}
