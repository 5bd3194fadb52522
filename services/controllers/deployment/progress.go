package deployment

import (
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
)

// syncRolloutStatus writes the status during a rollout, with the
// Progressing condition: NewReplicaSetAvailable once complete,
// ReplicaSetUpdated while there is progress, ProgressDeadlineExceeded when
// there was none for progressDeadlineSeconds. With no change to write, it
// schedules the next progress check.
func (s *syncer) syncRolloutStatus(allRSs []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet, d *appsv1.Deployment) error {
	st := s.calculateStatus(allRSs, newRS, d)
	if !hasProgressDeadline(d) {
		removeCondition(&st, appsv1.DeploymentProgressing)
	}
	cur := getCondition(d.Status, appsv1.DeploymentProgressing)
	complete := st.Replicas == st.UpdatedReplicas && cur != nil && cur.Reason == ReasonNewRSAvailable
	if hasProgressDeadline(d) && !complete {
		subject := fmt.Sprintf("Deployment %q", d.Name)
		if newRS != nil {
			subject = fmt.Sprintf("ReplicaSet %q", newRS.Name)
		}
		now := s.now()
		switch {
		case deploymentComplete(d, &st):
			setCondition(&st, newCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, ReasonNewRSAvailable, subject+" has successfully progressed.", now))
		case deploymentProgressing(d, &st):
			// Progress refreshes lastUpdateTime even when the reason
			// stays, which setCondition would not do.
			c := newCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, ReasonReplicaSetUpdated, subject+" is progressing.", now)
			if cur != nil {
				if cur.Status == corev1.ConditionTrue {
					c.LastTransitionTime = cur.LastTransitionTime
				}
				removeCondition(&st, appsv1.DeploymentProgressing)
			}
			setCondition(&st, c)
		case deploymentTimedOut(d, &st, now):
			setCondition(&st, newCondition(appsv1.DeploymentProgressing, corev1.ConditionFalse, ReasonTimedOut, subject+" has timed out progressing.", now))
		}
	}
	if failures := replicaFailures(allRSs, newRS); len(failures) > 0 {
		setCondition(&st, failures[0])
	} else {
		removeCondition(&st, appsv1.DeploymentReplicaFailure)
	}
	if apiequality.Semantic.DeepEqual(d.Status, st) {
		s.requeueStuck(d, st)
		return nil
	}
	d.Status = st
	return s.updateStatus(d)
}

// replicaFailures turns the ReplicaFailure conditions of the replica sets
// (the new one's first) into deployment conditions.
func replicaFailures(allRSs []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) []appsv1.DeploymentCondition {
	conv := func(rss []*appsv1.ReplicaSet) []appsv1.DeploymentCondition {
		var out []appsv1.DeploymentCondition
		for _, rs := range rss {
			if rs == nil {
				continue
			}
			for _, c := range rs.Status.Conditions {
				if c.Type == appsv1.ReplicaSetReplicaFailure {
					out = append(out, appsv1.DeploymentCondition{
						Type: appsv1.DeploymentConditionType(c.Type), Status: c.Status, Reason: c.Reason, Message: c.Message,
						LastTransitionTime: c.LastTransitionTime, LastUpdateTime: c.LastTransitionTime,
					})
				}
			}
		}
		return out
	}
	if out := conv([]*appsv1.ReplicaSet{newRS}); len(out) > 0 {
		return out
	}
	return conv(allRSs)
}

// requeueStuck schedules a progress check at the deadline of a rollout
// that made no progress in this sync.
func (s *syncer) requeueStuck(d *appsv1.Deployment, st appsv1.DeploymentStatus) {
	cur := getCondition(d.Status, appsv1.DeploymentProgressing)
	if !hasProgressDeadline(d) || cur == nil || deploymentComplete(d, &st) || cur.Reason == ReasonTimedOut {
		return
	}
	after := cur.LastUpdateTime.Add(time.Duration(*d.Spec.ProgressDeadlineSeconds) * time.Second).Sub(s.now())
	// A second more, as kube, so the check lands after the deadline.
	s.requeueWithin(max(after, 0) + time.Second)
}

// requeueWithin asks for another sync after d at the latest.
func (s *syncer) requeueWithin(d time.Duration) {
	if s.requeue == 0 || d < s.requeue {
		s.requeue = d
	}
}
