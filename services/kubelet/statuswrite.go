package kubelet

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/utils/ptr"

	"github.com/cairn-dev/cairn/events/consumer"
)

// writeStatus writes st through pods/status if it differs from what the API
// holds (or what this worker last wrote, which the cache may not show
// yet). Like the kubelet's PatchPodStatus it sends a strategic merge patch
// from the old status to the new one, with the pod's UID in it, so it
// needs no resourceVersion (no conflicts with other writers) and never
// touches another pod of the same name. It uses ctx, so the write carries
// the cause of the round.
func (k *Kubelet) writeStatus(ctx context.Context, w *worker, pod *corev1.Pod, st corev1.PodStatus) error {
	old := w.oldStatus(pod)
	if apiequality.Semantic.DeepEqual(old, st) {
		return nil
	}
	patch, err := statusPatch(pod.UID, old, st)
	if err != nil {
		return err
	}
	out, err := k.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch,
		metav1.PatchOptions{}, "status")
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("patch status of %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	w.wrote(out)
	return nil
}

// statusPatch is the two-way strategic merge patch from old to st, with
// metadata.uid as a precondition.
func statusPatch(uid types.UID, old, st corev1.PodStatus) ([]byte, error) {
	a, err := json.Marshal(corev1.Pod{Status: old})
	if err != nil {
		return nil, fmt.Errorf("status patch: %w", err)
	}
	b, err := json.Marshal(corev1.Pod{Status: st})
	if err != nil {
		return nil, fmt.Errorf("status patch: %w", err)
	}
	patch, err := strategicpatch.CreateTwoWayMergePatch(a, b, corev1.Pod{})
	if err != nil {
		return nil, fmt.Errorf("status patch: %w", err)
	}
	var m map[string]any
	if err := json.Unmarshal(patch, &m); err != nil {
		return nil, fmt.Errorf("status patch: %w", err)
	}
	m["metadata"] = map[string]any{"uid": string(uid)}
	return json.Marshal(m)
}

// deletePod removes the pod from the API once the kubelet has cleaned up:
// gracePeriodSeconds=0 with the pod's UID as precondition, so a new pod of
// the same name is never deleted.
func (k *Kubelet) deletePod(ctx context.Context, pod *corev1.Pod) error {
	err := k.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To(int64(0)),
		Preconditions:      &metav1.Preconditions{UID: ptr.To(pod.UID)},
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}

// oldStatus is the status to compare with and to carry transition times
// from: the last write of this worker if the cache has not caught up
// with it, else the cached pod's.
func (w *worker) oldStatus(pod *corev1.Pod) corev1.PodStatus {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.last != nil && newerRV(w.lastRV, pod.ResourceVersion) {
		return *w.last
	}
	return pod.Status
}

func newerRV(a, b string) bool {
	x, err1 := strconv.ParseInt(a, 10, 64)
	y, err2 := strconv.ParseInt(b, 10, 64)
	return err1 == nil && err2 == nil && x > y
}

func (w *worker) wrote(p *corev1.Pod) {
	w.mu.Lock()
	defer w.mu.Unlock()
	st := p.Status
	w.last, w.lastRV = &st, p.ResourceVersion
}

func (w *worker) getCause() consumer.Cause {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.cause
}

func (w *worker) waitingFor(name string) (corev1.ContainerStateWaiting, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	s, ok := w.waiting[name]
	return s, ok
}

func (w *worker) setWaiting(name, reason, msg string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.waiting[name] = corev1.ContainerStateWaiting{Reason: reason, Message: msg}
}

func (w *worker) clearWaiting(name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.waiting, name)
}

func (w *worker) deleted() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.deleteSent
}

func (w *worker) markDeleted() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.deleteSent = true
}

func (w *worker) resetWaiting() {
	w.mu.Lock()
	defer w.mu.Unlock()
	clear(w.waiting)
}
