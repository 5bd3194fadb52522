package job

import (
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

const (
	completionIndexEnvName = "JOB_COMPLETION_INDEX"
	unknownCompletionIndex = -1
	// maxGeneratedNameLength is the apiserver's limit on a generateName
	// prefix (names.MaxGeneratedNameLength).
	maxGeneratedNameLength = 63 - 5
)

func isIndexedJob(job *batchv1.Job) bool {
	return job.Spec.CompletionMode != nil && *job.Spec.CompletionMode == batchv1.IndexedCompletion
}

func hasBackoffLimitPerIndex(job *batchv1.Job) bool { return job.Spec.BackoffLimitPerIndex != nil }

// interval is the indexes First..Last.
type interval struct{ First, Last int }

// orderedIntervals is a set of indexes as sorted, disjoint, non-adjacent
// intervals: the form of status.completedIndexes ("1,3-5").
type orderedIntervals []interval

// calculateSucceededIndexes returns the indexes of status.completedIndexes
// and those plus the indexes of succeeded pods not counted yet.
func calculateSucceededIndexes(log *slog.Logger, job *batchv1.Job, pods []*corev1.Pod) (prev, all orderedIntervals) {
	completions := int(*job.Spec.Completions)
	prev = parseIndexesFromString(log, job.Status.CompletedIndexes, completions)
	var newSucceeded []int
	for _, p := range pods {
		ix := getCompletionIndex(p.Annotations)
		if p.Status.Phase == corev1.PodSucceeded && ix != unknownCompletionIndex && ix < completions && hasJobTrackingFinalizer(p) {
			newSucceeded = append(newSucceeded, ix)
		}
	}
	return prev, prev.withOrderedIndexes(sortedUnique(newSucceeded))
}

// calculateFailedIndexes returns status.failedIndexes plus the indexes
// whose pods failed beyond backoffLimitPerIndex since.
func calculateFailedIndexes(log *slog.Logger, job *batchv1.Job, pods []*corev1.Pod) *orderedIntervals {
	completions := int(*job.Spec.Completions)
	var prev orderedIntervals
	if job.Status.FailedIndexes != nil {
		prev = parseIndexesFromString(log, *job.Status.FailedIndexes, completions)
	}
	var newFailed []int
	for _, p := range pods {
		ix := getCompletionIndex(p.Annotations)
		if ix != unknownCompletionIndex && ix < completions && hasJobTrackingFinalizer(p) && isIndexFailed(log, job, p) {
			newFailed = append(newFailed, ix)
		}
	}
	out := prev.withOrderedIndexes(sortedUnique(newFailed))
	return &out
}

func isIndexFailed(log *slog.Logger, job *batchv1.Job, pod *corev1.Pod) bool {
	counted := false
	if isPodFailed(pod, job) {
		if job.Spec.PodFailurePolicy != nil {
			_, countFailed, action := matchPodFailurePolicy(job.Spec.PodFailurePolicy, pod)
			if action != nil && *action == batchv1.PodFailurePolicyActionFailIndex {
				return true
			}
			counted = countFailed
		} else {
			counted = true
		}
	}
	return counted && getIndexFailureCount(log, pod) >= *job.Spec.BackoffLimitPerIndex
}

func sortedUnique(xs []int) []int {
	slices.Sort(xs)
	return slices.Compact(xs)
}

// withOrderedIndexes returns oi with newIndexes (sorted) added.
func (oi orderedIntervals) withOrderedIndexes(newIndexes []int) orderedIntervals {
	add := make(orderedIntervals, len(newIndexes))
	for i, ix := range newIndexes {
		add[i] = interval{ix, ix}
	}
	return oi.merge(add)
}

// merge returns the union of oi and other.
func (oi orderedIntervals) merge(other orderedIntervals) orderedIntervals {
	var out orderedIntervals
	push := func(iv interval) {
		if n := len(out); n == 0 || iv.First > out[n-1].Last+1 {
			out = append(out, iv)
		} else if out[n-1].Last < iv.Last {
			out[n-1].Last = iv.Last
		}
	}
	i, j := 0, 0
	for i < len(oi) && j < len(other) {
		if oi[i].First < other[j].First {
			push(oi[i])
			i++
		} else {
			push(other[j])
			j++
		}
	}
	for ; i < len(oi); i++ {
		push(oi[i])
	}
	for ; j < len(other); j++ {
		push(other[j])
	}
	return out
}

// total is the number of indexes in oi.
func (oi orderedIntervals) total() int {
	n := 0
	for _, iv := range oi {
		n += iv.Last - iv.First + 1
	}
	return n
}

// String is the status form: "0,2-4,6,7" (two adjacent indexes are
// listed, three or more are a range), as kube writes it.
func (oi orderedIntervals) String() string {
	var b strings.Builder
	for _, v := range oi {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(v.First))
		if v.Last > v.First {
			if v.Last == v.First+1 {
				b.WriteByte(',')
			} else {
				b.WriteByte('-')
			}
			b.WriteString(strconv.Itoa(v.Last))
		}
	}
	return b.String()
}

func (oi *orderedIntervals) has(ix int) bool {
	if oi == nil {
		return false
	}
	s := *oi
	i := sort.Search(len(s), func(i int) bool { return s[i].Last >= ix })
	return i < len(s) && s[i].First <= ix
}

// parseIndexesFromString parses status.completedIndexes, dropping indexes
// at or above completions and skipping corrupt intervals.
func parseIndexesFromString(log *slog.Logger, s string, completions int) orderedIntervals {
	if s == "" {
		return nil
	}
	var out orderedIntervals
	for _, part := range strings.Split(s, ",") {
		limits := strings.Split(part, "-")
		var iv interval
		var err error
		if iv.First, err = strconv.Atoi(limits[0]); err != nil {
			log.Info("corrupted indexes interval, ignoring", "interval", part, "err", err)
			continue
		}
		if iv.First >= completions {
			break
		}
		iv.Last = iv.First
		if len(limits) > 1 {
			if iv.Last, err = strconv.Atoi(limits[1]); err != nil {
				log.Info("corrupted indexes interval, ignoring", "interval", part, "err", err)
				continue
			}
			iv.Last = min(iv.Last, completions-1)
		}
		if n := len(out); n > 0 && out[n-1].Last == iv.First-1 {
			out[n-1].Last = iv.Last
		} else {
			out = append(out, iv)
		}
	}
	return out
}

// firstPendingIndexes returns up to count indexes below completions that
// no active pod holds and that neither succeeded nor failed (with
// podReplacementPolicy Failed, terminating pods hold their index too).
func firstPendingIndexes(jc *syncJobCtx, count, completions int) []int {
	if count == 0 {
		return nil
	}
	nonPending := jc.succeededIndexes.withOrderedIndexes(sortedUnique(indexesOf(jc.activePods)))
	if onlyReplaceFailedPods(jc.job) {
		nonPending = nonPending.withOrderedIndexes(sortedUnique(indexesOf(terminatingPods(jc.pods))))
	}
	if jc.failedIndexes != nil {
		nonPending = nonPending.merge(*jc.failedIndexes)
	}
	out := make([]int, 0, count)
	candidate := 0
	for _, iv := range nonPending {
		for ; candidate < completions && len(out) < count && candidate < iv.First; candidate++ {
			out = append(out, candidate)
		}
		candidate = max(candidate, iv.Last+1)
	}
	for ; candidate < completions && len(out) < count; candidate++ {
		out = append(out, candidate)
	}
	return out
}

func indexesOf(pods []*corev1.Pod) []int {
	var out []int
	for _, p := range pods {
		if ix := getCompletionIndex(p.Annotations); ix != unknownCompletionIndex {
			out = append(out, ix)
		}
	}
	return out
}

// appendDuplicatedIndexPodsForRemoval puts into rm every active pod
// without a valid index and all but the best pod of each repeated index;
// the others go into left.
func appendDuplicatedIndexPodsForRemoval(rm, left, pods []*corev1.Pod, completions int) ([]*corev1.Pod, []*corev1.Pod) {
	sortByCompletionIndex(pods)
	last := unknownCompletionIndex
	first := 0
	looped := 0
	for i, p := range pods {
		ix := getCompletionIndex(p.Annotations)
		if ix >= completions {
			rm = append(rm, pods[i:]...)
			break
		}
		if ix != last {
			rm, left = appendSameIndex(rm, left, pods[first:i], last)
			first = i
			last = ix
		}
		looped++
	}
	return appendSameIndex(rm, left, pods[first:looped], last)
}

func appendSameIndex(rm, left, pods []*corev1.Pod, ix int) ([]*corev1.Pod, []*corev1.Pod) {
	if ix == unknownCompletionIndex {
		return append(rm, pods...), left
	}
	if len(pods) == 1 {
		return rm, append(left, pods[0])
	}
	sortActivePods(pods)
	return append(rm, pods[:len(pods)-1]...), append(left, pods[len(pods)-1])
}

func sortByCompletionIndex(pods []*corev1.Pod) {
	sort.SliceStable(pods, func(i, j int) bool {
		return getCompletionIndex(pods[i].Annotations) < getCompletionIndex(pods[j].Annotations)
	})
}

// getPodsWithDelayedDeletionPerIndex is, per index with backoffLimitPerIndex,
// the last failed pod whose finalizer stays until its replacement exists,
// so that the replacement can carry the index's failure count.
func getPodsWithDelayedDeletionPerIndex(log *slog.Logger, jc *syncJobCtx) map[int]*corev1.Pod {
	active := map[int]bool{}
	for _, ix := range indexesOf(jc.activePods) {
		active[ix] = true
	}
	out := map[int]*corev1.Pod{}
	for _, p := range validPods(jc, nil, func(p *corev1.Pod) bool { return isPodFailed(p, jc.job) }) {
		ix := getCompletionIndex(p.Annotations)
		if jc.succeededIndexes.has(ix) || jc.failedIndexes.has(ix) || active[ix] {
			continue
		}
		if last, ok := out[ix]; ok {
			if getIndexAbsoluteFailureCount(log, last) <= getIndexAbsoluteFailureCount(log, p) && !getFinishedTime(p).Before(getFinishedTime(last)) {
				out[ix] = p
			}
		} else {
			out[ix] = p
		}
	}
	return out
}

func addIndexFailureCountAnnotation(log *slog.Logger, t *corev1.PodTemplateSpec, job *batchv1.Job, replaced *corev1.Pod) {
	failures, ignored := getNewIndexFailureCounts(log, job, replaced)
	t.Annotations[batchv1.JobIndexFailureCountAnnotation] = strconv.Itoa(int(failures))
	if ignored > 0 {
		t.Annotations[batchv1.JobIndexIgnoredFailureCountAnnotation] = strconv.Itoa(int(ignored))
	}
}

func getNewIndexFailureCounts(log *slog.Logger, job *batchv1.Job, replaced *corev1.Pod) (int32, int32) {
	if replaced == nil {
		return 0, 0
	}
	failures := parseCountAnnotation(log, replaced, batchv1.JobIndexFailureCountAnnotation)
	ignored := parseCountAnnotation(log, replaced, batchv1.JobIndexIgnoredFailureCountAnnotation)
	if _, countFailed, _ := matchPodFailurePolicy(job.Spec.PodFailurePolicy, replaced); countFailed {
		failures++
	} else {
		ignored++
	}
	return failures, ignored
}

func getCompletionIndex(annotations map[string]string) int {
	v, ok := annotations[batchv1.JobCompletionIndexAnnotation]
	if !ok {
		return unknownCompletionIndex
	}
	i, err := strconv.Atoi(v)
	if err != nil || i < 0 {
		return unknownCompletionIndex
	}
	return i
}

func getIndexFailureCount(log *slog.Logger, pod *corev1.Pod) int32 {
	return parseCountAnnotation(log, pod, batchv1.JobIndexFailureCountAnnotation)
}

func getIndexAbsoluteFailureCount(log *slog.Logger, pod *corev1.Pod) int32 {
	return getIndexFailureCount(log, pod) + parseCountAnnotation(log, pod, batchv1.JobIndexIgnoredFailureCountAnnotation)
}

// parseCountAnnotation reads a failure count annotation; a missing,
// corrupt or out-of-range value is 0, as kube reads it.
func parseCountAnnotation(log *slog.Logger, pod *corev1.Pod, key string) int32 {
	v, ok := pod.Annotations[key]
	if !ok {
		return 0
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n > math.MaxInt32 {
		log.Info("invalid failure count annotation", "pod", pod.Name, "annotation", key, "value", v)
		return 0
	}
	return int32(n)
}

func addCompletionIndexEnvVariables(t *corev1.PodTemplateSpec) {
	for i := range t.Spec.InitContainers {
		addCompletionIndexEnvVariable(&t.Spec.InitContainers[i])
	}
	for i := range t.Spec.Containers {
		addCompletionIndexEnvVariable(&t.Spec.Containers[i])
	}
}

func addCompletionIndexEnvVariable(c *corev1.Container) {
	for _, v := range c.Env {
		if v.Name == completionIndexEnvName {
			return
		}
	}
	c.Env = append(c.Env, corev1.EnvVar{Name: completionIndexEnvName, ValueFrom: &corev1.EnvVarSource{
		FieldRef: &corev1.ObjectFieldSelector{FieldPath: fmt.Sprintf("metadata.labels['%s']", batchv1.JobCompletionIndexAnnotation)},
	}})
}

func addCompletionIndexAnnotationAndLabel(t *corev1.PodTemplateSpec, index int) {
	if t.Annotations == nil {
		t.Annotations = map[string]string{}
	}
	if t.Labels == nil {
		t.Labels = map[string]string{}
	}
	t.Annotations[batchv1.JobCompletionIndexAnnotation] = strconv.Itoa(index)
	t.Labels[batchv1.JobCompletionIndexAnnotation] = strconv.Itoa(index)
}

func podGenerateNameWithIndex(jobName string, index int) string {
	suffix := "-" + strconv.Itoa(index) + "-"
	prefix := jobName + suffix
	if len(prefix) > maxGeneratedNameLength {
		prefix = prefix[:maxGeneratedNameLength-len(suffix)] + suffix
	}
	return prefix
}
