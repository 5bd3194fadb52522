package job

import (
	"log/slog"
	"strconv"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

var discard = slog.New(slog.DiscardHandler)

// Ported from kube's TestGetRemainingBackoffTime and
// TestNewBackoffRecord (backoff_utils_test.go), with a fixed clock.
func TestRemainingBackoffTime(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name     string
		failures int32
		since    time.Duration // since the last failure
		want     time.Duration
	}{
		{"no failures", 0, 0, 0},
		{"one failure, just now", 1, 0, 10 * time.Second},
		{"one failure, 3s ago", 1, 3 * time.Second, 7 * time.Second},
		{"one failure, 11s ago", 1, 11 * time.Second, 0},
		{"two failures double", 2, 0, 20 * time.Second},
		{"three failures", 3, 5 * time.Second, 35 * time.Second},
		{"six failures", 6, 0, 320 * time.Second},
		{"seven failures capped at 6m", 7, 0, 6 * time.Minute},
		{"many failures capped", 50, time.Minute, 5 * time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			last := now.Add(-tt.since)
			b := backoffRecord{failuresAfterLastSuccess: tt.failures, lastFailureTime: &last}
			if got := b.remainingTime(now); got != tt.want {
				t.Errorf("remaining %v, want %v", got, tt.want)
			}
		})
	}
}

func finishedPod(name string, phase corev1.PodPhase, at time.Time) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.PodStatus{Phase: phase,
		ContainerStatuses: []corev1.ContainerStatus{{State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{FinishedAt: metav1.NewTime(at)}}}}}}
}

func TestNextBackoffRecord(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	prevFail := at(1)
	tests := []struct {
		name              string
		prev              backoffRecord
		succeeded, failed []*corev1.Pod
		wantFailures      int32
		wantLast          *time.Time
	}{
		{"nothing new keeps the record", backoffRecord{2, &prevFail}, nil, nil, 2, &prevFail},
		{"failures add up", backoffRecord{1, &prevFail}, nil,
			[]*corev1.Pod{finishedPod("b", corev1.PodFailed, at(5)), finishedPod("a", corev1.PodFailed, at(3))}, 3, ptr(at(5))},
		{"a success resets", backoffRecord{4, &prevFail}, []*corev1.Pod{finishedPod("s", corev1.PodSucceeded, at(2))}, nil, 0, nil},
		{"failures after the last success count", backoffRecord{4, &prevFail},
			[]*corev1.Pod{finishedPod("s", corev1.PodSucceeded, at(5))},
			[]*corev1.Pod{finishedPod("f1", corev1.PodFailed, at(4)), finishedPod("f2", corev1.PodFailed, at(6)), finishedPod("f3", corev1.PodFailed, at(7))},
			2, ptr(at(7))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := nextBackoffRecord(tt.prev, tt.succeeded, tt.failed)
			if got.failuresAfterLastSuccess != tt.wantFailures || !ptrEqual(got.lastFailureTime, tt.wantLast) {
				t.Errorf("record %d %v, want %d %v", got.failuresAfterLastSuccess, got.lastFailureTime, tt.wantFailures, tt.wantLast)
			}
		})
	}
}

// Ported from kube's TestCalculateSucceededIndexes / interval String and
// parse cases (indexed_job_utils_test.go).
func TestIntervals(t *testing.T) {
	tests := []struct {
		in          string
		completions int
		add         []int
		want        string
		total       int
	}{
		{"", 5, nil, "", 0},
		{"", 5, []int{0, 1, 2}, "0-2", 3},
		{"1", 5, []int{0, 2}, "0-2", 3},
		{"0,2", 5, nil, "0,2", 2},
		{"0-1", 5, nil, "0,1", 2},
		{"3-5", 10, []int{1, 7}, "1,3-5,7", 5},
		{"1-3,5", 4, nil, "1-3", 3},
		{"2-8", 5, nil, "2-4", 3},
		{"x,2", 5, []int{3}, "2,3", 2},
		{"0,1,2,3", 10, []int{9}, "0-3,9", 5},
	}
	for _, tt := range tests {
		t.Run(tt.in+"+"+strconv.Itoa(len(tt.add)), func(t *testing.T) {
			got := parseIndexesFromString(discard, tt.in, tt.completions).withOrderedIndexes(tt.add)
			if got.String() != tt.want || got.total() != tt.total {
				t.Errorf("got %q (%d), want %q (%d)", got.String(), got.total(), tt.want, tt.total)
			}
			for _, ix := range tt.add {
				if !got.has(ix) {
					t.Errorf("has(%d) false", ix)
				}
			}
		})
	}
}

func indexedPod(ix int, phase corev1.PodPhase, deleting bool) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p" + strconv.Itoa(ix), UID: types.UID("u" + strconv.Itoa(ix)),
		Annotations: map[string]string{batchv1.JobCompletionIndexAnnotation: strconv.Itoa(ix)},
		Finalizers:  []string{batchv1.JobTrackingFinalizer}}, Status: corev1.PodStatus{Phase: phase}}
	if deleting {
		now := metav1.Now()
		p.DeletionTimestamp = &now
	}
	return p
}

// Ported from kube's TestFirstPendingIndexes: each index is handed out
// once, skipping those running, succeeded or failed.
func TestFirstPendingIndexes(t *testing.T) {
	indexed := batchv1.IndexedCompletion
	tests := []struct {
		name        string
		count       int
		completions int
		active      []int
		succeeded   string
		failed      *string
		replaceOnly bool
		terminating []int
		want        []int
	}{
		{"cnt greater than completions", 5, 3, nil, "", nil, false, nil, []int{0, 1, 2}},
		{"cnt less than completions", 2, 5, nil, "", nil, false, nil, []int{0, 1}},
		{"first pods active", 3, 10, []int{0, 1}, "", nil, false, nil, []int{2, 3, 4}},
		{"last pods active or succeeded", 5, 6, []int{4}, "5", nil, false, nil, []int{0, 1, 2, 3}},
		{"mixed", 5, 20, []int{3, 5, 8}, "1,6,9-11", nil, false, nil, []int{0, 2, 4, 7, 12}},
		{"failed indexes skipped", 3, 10, nil, "0", ptr("1-3"), false, nil, []int{4, 5, 6}},
		{"terminating hold their index with podReplacementPolicy Failed", 3, 5, nil, "", nil, true, []int{0, 2}, []int{1, 3, 4}},
		{"terminating do not hold it otherwise", 2, 5, nil, "", nil, false, []int{0}, []int{0, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			job := &batchv1.Job{Spec: batchv1.JobSpec{CompletionMode: &indexed, Completions: ptr(int32(tt.completions))}}
			if tt.replaceOnly {
				job.Spec.PodReplacementPolicy = ptr(batchv1.Failed)
			}
			jc := &syncJobCtx{job: job, succeededIndexes: parseIndexesFromString(discard, tt.succeeded, tt.completions)}
			for _, ix := range tt.active {
				p := indexedPod(ix, corev1.PodRunning, false)
				jc.activePods = append(jc.activePods, p)
				jc.pods = append(jc.pods, p)
			}
			for _, ix := range tt.terminating {
				jc.pods = append(jc.pods, indexedPod(ix, corev1.PodRunning, true))
			}
			if tt.failed != nil {
				f := parseIndexesFromString(discard, *tt.failed, tt.completions)
				jc.failedIndexes = &f
			}
			got := firstPendingIndexes(jc, tt.count, tt.completions)
			if len(got) != len(tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Fatalf("got %v, want %v", got, tt.want)
				}
			}
		})
	}
}

// Ported from kube's TestMatchPodFailurePolicy (pod_failure_policy_test.go).
func TestMatchPodFailurePolicy(t *testing.T) {
	exit := func(code int32) corev1.PodStatus {
		return corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{Name: "main",
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code}}}}}
	}
	rule := func(a batchv1.PodFailurePolicyAction, op batchv1.PodFailurePolicyOnExitCodesOperator, codes ...int32) batchv1.PodFailurePolicyRule {
		return batchv1.PodFailurePolicyRule{Action: a, OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{Operator: op, Values: codes}}
	}
	disrupted := corev1.PodStatus{Phase: corev1.PodFailed, Conditions: []corev1.PodCondition{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue}}}
	onDisruption := batchv1.PodFailurePolicyRule{Action: batchv1.PodFailurePolicyActionIgnore,
		OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue}}}
	tests := []struct {
		name       string
		rules      []batchv1.PodFailurePolicyRule
		status     corev1.PodStatus
		wantMsg    string
		wantCount  bool
		wantAction *batchv1.PodFailurePolicyAction
	}{
		{"no rule matches: counted", []batchv1.PodFailurePolicyRule{rule(batchv1.PodFailurePolicyActionFailJob, batchv1.PodFailurePolicyOnExitCodesOpIn, 5)},
			exit(2), "", true, nil},
		{"FailJob on In", []batchv1.PodFailurePolicyRule{rule(batchv1.PodFailurePolicyActionFailJob, batchv1.PodFailurePolicyOnExitCodesOpIn, 1, 2)},
			exit(2), "Container main for pod default/mypod failed with exit code 2 matching FailJob rule at index 0", true, ptr(batchv1.PodFailurePolicyActionFailJob)},
		{"Ignore on NotIn", []batchv1.PodFailurePolicyRule{rule(batchv1.PodFailurePolicyActionIgnore, batchv1.PodFailurePolicyOnExitCodesOpNotIn, 1)},
			exit(2), "", false, ptr(batchv1.PodFailurePolicyActionIgnore)},
		{"Count", []batchv1.PodFailurePolicyRule{rule(batchv1.PodFailurePolicyActionCount, batchv1.PodFailurePolicyOnExitCodesOpIn, 2)},
			exit(2), "", true, ptr(batchv1.PodFailurePolicyActionCount)},
		{"first matching rule wins", []batchv1.PodFailurePolicyRule{
			rule(batchv1.PodFailurePolicyActionIgnore, batchv1.PodFailurePolicyOnExitCodesOpIn, 2),
			rule(batchv1.PodFailurePolicyActionFailJob, batchv1.PodFailurePolicyOnExitCodesOpIn, 2)},
			exit(2), "", false, ptr(batchv1.PodFailurePolicyActionIgnore)},
		{"exit code 0 never matches", []batchv1.PodFailurePolicyRule{rule(batchv1.PodFailurePolicyActionFailJob, batchv1.PodFailurePolicyOnExitCodesOpNotIn, 1)},
			exit(0), "", true, nil},
		{"Ignore on a pod condition", []batchv1.PodFailurePolicyRule{onDisruption}, disrupted, "", false, ptr(batchv1.PodFailurePolicyActionIgnore)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "mypod"}, Status: tt.status}
			msg, count, action := matchPodFailurePolicy(&batchv1.PodFailurePolicy{Rules: tt.rules}, pod)
			gotMsg := ""
			if msg != nil {
				gotMsg = *msg
			}
			if gotMsg != tt.wantMsg || count != tt.wantCount || !ptrEqual(action, tt.wantAction) {
				t.Errorf("got %q %v %v, want %q %v %v", gotMsg, count, action, tt.wantMsg, tt.wantCount, tt.wantAction)
			}
		})
	}
}

// Ported from kube's TestMatchSuccessPolicy (success_policy_test.go).
func TestMatchSuccessPolicy(t *testing.T) {
	tests := []struct {
		name      string
		rules     []batchv1.SuccessPolicyRule
		succeeded string
		wantMsg   string
		wantMet   bool
	}{
		{"indexes all succeeded", []batchv1.SuccessPolicyRule{{SucceededIndexes: ptr("0-2")}}, "0-3", "Matched rules at index 0", true},
		{"indexes missing one", []batchv1.SuccessPolicyRule{{SucceededIndexes: ptr("0-2")}}, "0,2", "", false},
		{"indexes and count", []batchv1.SuccessPolicyRule{{SucceededIndexes: ptr("0-5"), SucceededCount: ptr[int32](2)}}, "1,4", "Matched rules at index 0", true},
		{"count only", []batchv1.SuccessPolicyRule{{SucceededIndexes: ptr("7")}, {SucceededCount: ptr[int32](3)}}, "0-2", "Matched rules at index 1", true},
		{"nothing succeeded", []batchv1.SuccessPolicyRule{{SucceededCount: ptr[int32](0)}}, "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg, met := matchSuccessPolicy(discard, &batchv1.SuccessPolicy{Rules: tt.rules}, 10, parseIndexesFromString(discard, tt.succeeded, 10))
			if msg != tt.wantMsg || met != tt.wantMet {
				t.Errorf("got %q %v, want %q %v", msg, met, tt.wantMsg, tt.wantMet)
			}
		})
	}
}
