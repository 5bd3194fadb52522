package deployment

import (
	"fmt"
	"time"

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
	running, err := s.oldPodsRunning(d, newRS, oldRSs, rsList)
	if err != nil {
		return err
	}
	if running {
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
//
// A scaled-out controller manager follows only the pods of the replica
// sets in its own partitions (see package manager), and the deployment's
// replica sets may be in others: then the pods come from the apiserver,
// and since their deletion will not reach this replica as an event, the
// deployment is looked at again a second later.
func (s *syncer) oldPodsRunning(d *appsv1.Deployment, newRS *appsv1.ReplicaSet, oldRSs, rsList []*appsv1.ReplicaSet) (bool, error) {
	if sumStatus(oldRSs, statusReplicas) > 0 {
		return true, nil
	}
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return true, nil
	}
	owners := map[types.UID]bool{}
	for _, rs := range rsList {
		if newRS == nil || rs.UID != newRS.UID {
			owners[rs.UID] = true
		}
	}
	partial := s.pods.Partial()
	var pods []*corev1.Pod
	if partial {
		list, err := s.client.CoreV1().Pods(d.Namespace).List(s.ctx, metav1.ListOptions{LabelSelector: sel.String()})
		if err != nil {
			return false, fmt.Errorf("list old pods: %w", err)
		}
		for i := range list.Items {
			pods = append(pods, &list.Items[i])
		}
	} else {
		pods = s.pods.ByIndex("namespace", d.Namespace)
	}
	for _, pod := range pods {
		ref := metav1.GetControllerOf(pod)
		if ref == nil || !owners[ref.UID] || !sel.Matches(labels.Set(pod.Labels)) {
			continue
		}
		if pod.Status.Phase != corev1.PodFailed && pod.Status.Phase != corev1.PodSucceeded {
			if partial {
				s.requeueWithin(time.Second)
			}
			return true, nil
		}
	}
	return false, nil
}
