package scheduler

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/cairn-dev/cairn/events/consumer"
	"github.com/cairn-dev/cairn/services/eventrecord"
)

// Event reasons, as kube-scheduler's.
const (
	ReasonScheduled        = "Scheduled"
	ReasonFailedScheduling = "FailedScheduling"
	ReasonPreempted        = "Preempted"
	ReasonUnschedulable    = corev1.PodReasonUnschedulable
)

// Events are written by an eventrecord.Recorder, through a client of
// their own limited to Config.EventQPS: in a burst of scheduling, events
// queue and are written as fast as that allows, so that they never take
// more than that share of the apiserver and etcd from bindings.

// recorder writes core/v1 Events (asynchronously) and pod status updates
// (synchronously, from the caller's worker).
type recorder struct {
	*eventrecord.Recorder
	client kubernetes.Interface // pods/status
	now    func() time.Time
	log    *slog.Logger
}

// event queues an Event about pod; ctx carries its causation.
func (r *recorder) event(ctx context.Context, pod *corev1.Pod, typ, reason, action, msg string) {
	r.Event(ctx, eventrecord.Ref(pod, corev1.SchemeGroupVersion.WithKind("Pod")), typ, reason, action, msg)
}

// scheduled records the Scheduled event of a bound pod.
func (r *recorder) scheduled(ctx context.Context, pod *corev1.Pod, node string) {
	r.event(ctx, pod, corev1.EventTypeNormal, ReasonScheduled, "Binding",
		fmt.Sprintf("Successfully assigned %s/%s to %s", pod.Namespace, pod.Name, node))
}

// preempted records, on a victim, who preempted it.
func (r *recorder) preempted(ctx context.Context, victim, by *corev1.Pod, node string) {
	r.event(ctx, victim, corev1.EventTypeNormal, ReasonPreempted, "Preempting",
		fmt.Sprintf("Preempted by pod %s on node %s", by.UID, node))
}

// unschedulable records the FailedScheduling event and sets
// PodScheduled=False (reason Unschedulable, message msg) and
// status.nominatedNodeName through pods/status, skipping the write when
// the pod already says so.
func (r *recorder) unschedulable(ctx context.Context, pod *corev1.Pod, msg, nominated string) {
	r.event(ctx, pod, corev1.EventTypeWarning, ReasonFailedScheduling, "Scheduling", msg)
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == ReasonUnschedulable &&
			c.Message == msg && pod.Status.NominatedNodeName == nominated {
			return
		}
	}
	for try := 0; try < 2 && pod != nil; try++ {
		err := r.patchStatus(ctx, pod, msg, nominated)
		if !apierrors.IsConflict(err) {
			if err != nil && !apierrors.IsNotFound(err) && ctx.Err() == nil {
				r.log.Warn("status not written", "pod", consumer.KeyOf(pod), "err", err)
			}
			return
		}
		// Changed since our copy: only an unbound pod gets the condition.
		pod, err = r.client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil || pod.Spec.NodeName != "" || pod.DeletionTimestamp != nil {
			return
		}
	}
}

// patchStatus patches the condition and nomination with the pod's
// resourceVersion as precondition, so a pod bound meanwhile (by another
// replica) never gets PodScheduled=False.
func (r *recorder) patchStatus(ctx context.Context, pod *corev1.Pod, msg, nominated string) error {
	type status struct {
		Conditions        []corev1.PodCondition `json:"conditions"`
		NominatedNodeName *string               `json:"nominatedNodeName,omitempty"`
	}
	type meta struct {
		ResourceVersion string `json:"resourceVersion"`
	}
	var nom *string
	if nominated != "" || pod.Status.NominatedNodeName != "" {
		nom = &nominated
	}
	patch, err := json.Marshal(map[string]any{"metadata": meta{ResourceVersion: pod.ResourceVersion}, "status": status{
		Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: ReasonUnschedulable,
			Message: msg, LastTransitionTime: metav1.NewTime(r.now().Truncate(time.Second))}},
		NominatedNodeName: nom,
	}})
	if err != nil {
		return fmt.Errorf("scheduler: status patch: %w", err)
	}
	_, err = r.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch,
		metav1.PatchOptions{}, "status")
	return err
}
