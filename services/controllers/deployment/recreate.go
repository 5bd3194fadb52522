package deployment

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
)

// rolloutRecreate scales every old replica set to zero, waits until no old
// pod is left, then creates or scales up the new replica set.
func (s *syncer) rolloutRecreate(d *appsv1.Deployment, rsList []*appsv1.ReplicaSet) error {
	newRS, oldRSs, err := s.allReplicaSetsAndSyncRevision(d, rsList, false)
	if err != nil {
		return err
	}
	allRSs := append(append([]*appsv1.ReplicaSet{}, oldRSs...), newRS)

	scaledDown := false
	for _, rs := range filterActive(oldRSs) {
		scaled, _, err := s.scaleReplicaSetAndRecordEvent(rs, 0, d)
		if err != nil {
			return err
		}
		scaledDown = scaledDown || scaled
	}
	if scaledDown {
		return s.syncRolloutStatus(allRSs, newRS, d)
	}
	if s.oldPodsRunning(d, newRS, oldRSs, rsList) {
		return s.syncRolloutStatus(allRSs, newRS, d)
	}
	if newRS == nil {
		if newRS, oldRSs, err = s.allReplicaSetsAndSyncRevision(d, rsList, true); err != nil {
			return err
		}
		allRSs = append(append([]*appsv1.ReplicaSet{}, oldRSs...), newRS)
	}
	if _, _, err := s.scaleReplicaSetAndRecordEvent(newRS, *d.Spec.Replicas, d); err != nil {
		return err
	}
	if deploymentComplete(d, &d.Status) {
		if err := s.cleanupDeployment(oldRSs, d); err != nil {
			return err
		}
	}
	return s.syncRolloutStatus(allRSs, newRS, d)
}

// oldPodsRunning: an old replica set still reports pods, or a pod of one
// of the deployment's replica sets other than the new one is not finished.
func (s *syncer) oldPodsRunning(d *appsv1.Deployment, newRS *appsv1.ReplicaSet, oldRSs, rsList []*appsv1.ReplicaSet) bool {
	if sumStatus(oldRSs, statusReplicas) > 0 {
		return true
	}
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return true
	}
	owners := map[types.UID]bool{}
	for _, rs := range rsList {
		if newRS == nil || rs.UID != newRS.UID {
			owners[rs.UID] = true
		}
	}
	for _, pod := range s.pods.ByIndex("namespace", d.Namespace) {
		ref := metav1.GetControllerOf(pod)
		if ref == nil || !owners[ref.UID] || !sel.Matches(labels.Set(pod.Labels)) {
			continue
		}
		if pod.Status.Phase != corev1.PodFailed && pod.Status.Phase != corev1.PodSucceeded {
			return true
		}
	}
	return false
}
