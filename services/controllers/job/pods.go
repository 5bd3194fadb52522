package job

import (
	"slices"
	"sort"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

func hasJobTrackingFinalizer(pod *corev1.Pod) bool {
	return slices.Contains(pod.Finalizers, batchv1.JobTrackingFinalizer)
}

// isActive: neither finished nor being deleted (kube's FilterActivePods).
func isActive(p *corev1.Pod) bool {
	return p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed && p.DeletionTimestamp == nil
}

// isTerminating: being deleted and not finished (kube's
// IsPodTerminating).
func isTerminating(p *corev1.Pod) bool {
	return p.DeletionTimestamp != nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
}

func terminatingPods(pods []*corev1.Pod) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range pods {
		if isTerminating(p) {
			out = append(out, p)
		}
	}
	return out
}

func isPodReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func readySince(p *corev1.Pod) (t int64, ok bool) {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return c.LastTransitionTime.UnixNano(), true
		}
	}
	return 0, false
}

// isPodFailed: failed, or (unless only failed pods are replaced) deleted
// before it succeeded, as orphans never reach a phase (kube's isPodFailed).
func isPodFailed(p *corev1.Pod, job *batchv1.Job) bool {
	if p.Status.Phase == corev1.PodFailed {
		return true
	}
	if onlyReplaceFailedPods(job) {
		return false
	}
	return p.DeletionTimestamp != nil && p.Status.Phase != corev1.PodSucceeded
}

// onlyReplaceFailedPods: podReplacementPolicy Failed (the default with a
// podFailurePolicy).
func onlyReplaceFailedPods(job *batchv1.Job) bool {
	if job.Spec.PodReplacementPolicy != nil && *job.Spec.PodReplacementPolicy == batchv1.Failed {
		return true
	}
	return job.Spec.PodFailurePolicy != nil
}

func phaseRank(p corev1.PodPhase) int {
	switch p {
	case corev1.PodPending:
		return 0
	case corev1.PodUnknown:
		return 1
	case corev1.PodRunning:
		return 2
	}
	return 3
}

func restarts(p *corev1.Pod) int32 {
	var n int32
	for _, cs := range p.Status.ContainerStatuses {
		n = max(n, cs.RestartCount)
	}
	return n
}

// sortActivePods orders pods from the first to delete to the last, as
// kube's controller.ActivePods: unscheduled before scheduled, pending
// before unknown before running, not ready before ready, ready for less
// time first, more restarts first, newer first.
func sortActivePods(pods []*corev1.Pod) {
	sort.SliceStable(pods, func(i, j int) bool {
		a, b := pods[i], pods[j]
		if (a.Spec.NodeName == "") != (b.Spec.NodeName == "") {
			return a.Spec.NodeName == ""
		}
		if ra, rb := phaseRank(a.Status.Phase), phaseRank(b.Status.Phase); ra != rb {
			return ra < rb
		}
		if isPodReady(a) != isPodReady(b) {
			return !isPodReady(b)
		}
		ta, oka := readySince(a)
		tb, okb := readySince(b)
		if oka && okb && ta != tb {
			return ta > tb
		}
		if ra, rb := restarts(a), restarts(b); ra != rb {
			return ra > rb
		}
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return b.CreationTimestamp.Before(&a.CreationTimestamp)
		}
		return a.Name < b.Name
	})
}
