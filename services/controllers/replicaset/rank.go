package replicaset

import (
	"math"
	"sort"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/cairn-dev/cairn/schemas"
)

// PodDeletionCostAnnotation ranks the pods of a ReplicaSet for deletion:
// lower costs go first (kube's controller.kubernetes.io/pod-deletion-cost).
const PodDeletionCostAnnotation = "controller.kubernetes.io/pod-deletion-cost"

// rankPods sorts pods, in place, from the least useful to the most: the
// order a scale-down deletes them in (kube's ActivePodsWithRanks):
//
//  1. unscheduled before scheduled;
//  2. Pending before Unknown before Running;
//  3. not ready before ready;
//  4. lower pod-deletion-cost first;
//  5. more pods of the same owner on its node first (related counts the
//     active pods per node);
//  6. ready for less time first;
//  7. more container restarts first;
//  8. newer first.
//
// Times in 6 and 8 are compared in log2 buckets of their age at now (kube's
// LogarithmicScaleDown), ties broken by UID, so that pods created about
// together are removed in a spread-out order rather than strictly newest
// first.
func rankPods(pods []*corev1.Pod, related []*corev1.Pod, now time.Time) {
	perNode := map[string]int{}
	for _, p := range related {
		if p.Spec.NodeName != "" && isActive(p) {
			perNode[p.Spec.NodeName]++
		}
	}
	r := ranked{pods: pods, rank: make([]int, len(pods)), now: now}
	for i, p := range pods {
		r.rank[i] = perNode[p.Spec.NodeName]
	}
	sort.Sort(r)
}

// ranked is pods with their node ranks, sorted by lessUseful.
type ranked struct {
	pods []*corev1.Pod
	rank []int
	now  time.Time
}

func (r ranked) Len() int { return len(r.pods) }

func (r ranked) Swap(i, j int) {
	r.pods[i], r.pods[j] = r.pods[j], r.pods[i]
	r.rank[i], r.rank[j] = r.rank[j], r.rank[i]
}

func (r ranked) Less(i, j int) bool {
	a, b := r.pods[i], r.pods[j]
	if (a.Spec.NodeName == "") != (b.Spec.NodeName == "") {
		return a.Spec.NodeName == ""
	}
	if pa, pb := phaseOrder(a.Status.Phase), phaseOrder(b.Status.Phase); pa != pb {
		return pa < pb
	}
	if ra, rb := schemas.PodReady(a), schemas.PodReady(b); ra != rb {
		return !ra
	}
	if ca, cb := deletionCost(a), deletionCost(b); ca != cb {
		return ca < cb
	}
	if r.rank[i] != r.rank[j] {
		return r.rank[i] > r.rank[j]
	}
	if schemas.PodReady(a) {
		ta, tb := readySince(a), readySince(b)
		if !ta.Equal(tb) {
			return r.newer(a, b, ta, tb)
		}
	}
	if ra, rb := maxRestarts(a), maxRestarts(b); ra != rb {
		return ra > rb
	}
	ta, tb := a.CreationTimestamp.Time, b.CreationTimestamp.Time
	if !ta.Equal(tb) {
		return r.newer(a, b, ta, tb)
	}
	return false
}

// newer reports whether ta (of a) ranks as more recent than tb (of b):
// zero times first, then by log2 bucket of age, then by UID.
func (r ranked) newer(a, b *corev1.Pod, ta, tb time.Time) bool {
	if r.now.IsZero() || ta.IsZero() || tb.IsZero() {
		return afterOrZero(ta, tb)
	}
	if d := logBucket(r.now.Sub(ta)) - logBucket(r.now.Sub(tb)); d != 0 {
		return d < 0
	}
	return a.UID < b.UID
}

// afterOrZero orders a zero time first, then the later time first.
func afterOrZero(a, b time.Time) bool {
	if a.IsZero() || b.IsZero() {
		return a.IsZero()
	}
	return a.After(b)
}

func logBucket(d time.Duration) int {
	if d <= 0 {
		return -1
	}
	return int(math.Log2(float64(d)))
}

func phaseOrder(p corev1.PodPhase) int {
	switch p {
	case corev1.PodUnknown:
		return 1
	case corev1.PodRunning:
		return 2
	}
	return 0 // Pending and unset
}

func deletionCost(p *corev1.Pod) int32 {
	v, ok := p.Annotations[PodDeletionCostAnnotation]
	if !ok {
		return 0
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil {
		return 0
	}
	return int32(n)
}

func maxRestarts(p *corev1.Pod) int32 {
	var m int32
	for _, c := range p.Status.ContainerStatuses {
		m = max(m, c.RestartCount)
	}
	return m
}

// readyCondition is the pod's Ready condition, nil if it has none.
func readyCondition(p *corev1.Pod) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == corev1.PodReady {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// readySince is when a ready pod last became ready (zero if unknown).
func readySince(p *corev1.Pod) time.Time {
	if c := readyCondition(p); c != nil && c.Status == corev1.ConditionTrue {
		return c.LastTransitionTime.Time
	}
	return time.Time{}
}

// available reports whether a pod counts as available at now: ready for
// at least minReadySeconds (kube's IsPodAvailable). When it is ready but
// not yet available, after is how long until it will be (0 if never: its
// Ready condition has no transition time).
func available(p *corev1.Pod, minReadySeconds int32, now time.Time) (ok bool, after time.Duration) {
	if !schemas.PodReady(p) {
		return false, 0
	}
	if minReadySeconds == 0 {
		return true, 0
	}
	since := readySince(p)
	if since.IsZero() {
		return false, 0
	}
	at := since.Add(time.Duration(minReadySeconds) * time.Second)
	if at.Before(now) {
		return true, 0
	}
	return false, at.Sub(now) + time.Millisecond
}

// isActive reports whether a pod counts towards replicas: not terminating
// and not finished (kube's FilterActivePods).
func isActive(p *corev1.Pod) bool {
	return p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
}
