package deployment

import (
	"fmt"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
)

// rolloutRolling rolls the deployment out step by step: scale the new
// replica set up as far as maxSurge allows, else scale old ones down as far
// as maxUnavailable allows, and clean up the history once complete.
func (s *syncer) rolloutRolling(d *appsv1.Deployment, rsList []*appsv1.ReplicaSet) error {
	newRS, oldRSs, err := s.allReplicaSetsAndSyncRevision(d, rsList, true)
	if err != nil {
		return err
	}
	allRSs := append(append([]*appsv1.ReplicaSet{}, oldRSs...), newRS)

	scaledUp, err := s.reconcileNewReplicaSet(allRSs, newRS, d)
	if err != nil {
		return err
	}
	if scaledUp {
		return s.syncRolloutStatus(allRSs, newRS, d)
	}
	scaledDown, err := s.reconcileOldReplicaSets(allRSs, filterActive(oldRSs), newRS, d)
	if err != nil {
		return err
	}
	if scaledDown {
		return s.syncRolloutStatus(allRSs, newRS, d)
	}
	if deploymentComplete(d, &d.Status) {
		if err := s.cleanupDeployment(oldRSs, d); err != nil {
			return err
		}
	}
	return s.syncRolloutStatus(allRSs, newRS, d)
}

func (s *syncer) reconcileNewReplicaSet(allRSs []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet, d *appsv1.Deployment) (bool, error) {
	switch {
	case *newRS.Spec.Replicas == *d.Spec.Replicas:
		return false, nil
	case *newRS.Spec.Replicas > *d.Spec.Replicas:
		scaled, _, err := s.scaleReplicaSetAndRecordEvent(newRS, *d.Spec.Replicas, d)
		return scaled, err
	}
	n, err := newRSNewReplicas(d, allRSs, newRS)
	if err != nil {
		return false, err
	}
	scaled, _, err := s.scaleReplicaSetAndRecordEvent(newRS, n, d)
	return scaled, err
}

// reconcileOldReplicaSets scales old replica sets down: first their
// unhealthy replicas (which costs no availability), then as many healthy
// ones as keep spec.replicas - maxUnavailable available. Unavailable pods
// of the new replica set are held back from the budget so a broken
// rollout does not eat into the old, working pods.
func (s *syncer) reconcileOldReplicaSets(allRSs, oldRSs []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet, d *appsv1.Deployment) (bool, error) {
	if sumSpec(oldRSs) == 0 {
		return false, nil
	}
	allPods := sumSpec(allRSs)
	minAvailable := *d.Spec.Replicas - maxUnavailable(d)
	newUnavailable := *newRS.Spec.Replicas - newRS.Status.AvailableReplicas
	maxScaledDown := allPods - minAvailable - newUnavailable
	if maxScaledDown <= 0 {
		return false, nil
	}
	oldRSs, cleaned, err := s.cleanupUnhealthyReplicas(oldRSs, d, maxScaledDown)
	if err != nil {
		return false, err
	}
	allRSs = append(append([]*appsv1.ReplicaSet{}, oldRSs...), newRS)
	scaled, err := s.scaleDownOldReplicaSetsForRollingUpdate(allRSs, oldRSs, d)
	if err != nil {
		return false, err
	}
	return cleaned+scaled > 0, nil
}

// cleanupUnhealthyReplicas scales old replica sets down by their
// unavailable replicas, oldest first, at most maxCleanup in all.
func (s *syncer) cleanupUnhealthyReplicas(oldRSs []*appsv1.ReplicaSet, d *appsv1.Deployment, maxCleanup int32) ([]*appsv1.ReplicaSet, int32, error) {
	sort.Sort(byCreation(oldRSs))
	total := int32(0)
	for i, rs := range oldRSs {
		if total >= maxCleanup {
			break
		}
		if *rs.Spec.Replicas == 0 || *rs.Spec.Replicas <= rs.Status.AvailableReplicas || rs.Status.ObservedGeneration < rs.Generation {
			// Nothing unhealthy, or a status not yet of this size.
			continue
		}
		down := min(maxCleanup-total, *rs.Spec.Replicas-rs.Status.AvailableReplicas)
		n := *rs.Spec.Replicas - down
		if n > *rs.Spec.Replicas {
			return nil, 0, fmt.Errorf("invalid scale down of %s: %d -> %d", rs.Name, *rs.Spec.Replicas, n)
		}
		_, updated, err := s.scaleReplicaSetAndRecordEvent(rs, n, d)
		if err != nil {
			return nil, total, err
		}
		total += down
		oldRSs[i] = updated
	}
	return oldRSs, total, nil
}

// scaleDownOldReplicaSetsForRollingUpdate scales old replica sets down,
// oldest first, by the available pods above spec.replicas - maxUnavailable.
func (s *syncer) scaleDownOldReplicaSetsForRollingUpdate(allRSs, oldRSs []*appsv1.ReplicaSet, d *appsv1.Deployment) (int32, error) {
	minAvailable := *d.Spec.Replicas - maxUnavailable(d)
	available := availableLowerBound(allRSs)
	if available <= minAvailable {
		return 0, nil
	}
	sort.Sort(byCreation(oldRSs))
	total, budget := int32(0), available-minAvailable
	for _, rs := range oldRSs {
		if total >= budget {
			break
		}
		if *rs.Spec.Replicas == 0 {
			continue
		}
		down := min(*rs.Spec.Replicas, budget-total)
		if _, _, err := s.scaleReplicaSetAndRecordEvent(rs, *rs.Spec.Replicas-down, d); err != nil {
			return total, err
		}
		total += down
	}
	return total, nil
}
