package job

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
)

// TestJobCompletions: completions 4, parallelism 2 (kube's "parallel job"
// accounting): never more than 2 pods at once, 4 pods in all, each with
// the tracking finalizer until it is counted; then SuccessCriteriaMet and
// Complete with kube's reason, completionTime, no finalizer left, and
// Events as kube's. Every pod is created with the cause of the event the
// controller reacted to.
func TestJobCompletions(t *testing.T) {
	const ns = "completions"
	env := start(t, ns, Options{})
	runKubelet(t, env, ns, succeed)
	j := createJob(t, env, newJob(ns, "pi", ptr[int32](4), ptr[int32](2)))
	done := waitJob(t, env, ns, "pi", "Complete", func(j *batchv1.Job) bool { return hasCondition(j, batchv1.JobComplete, "") })
	if !hasCondition(done, batchv1.JobSuccessCriteriaMet, batchv1.JobReasonCompletionsReached) {
		t.Errorf("conditions %+v: want SuccessCriteriaMet CompletionsReached", done.Status.Conditions)
	}
	if done.Status.Succeeded != 4 || done.Status.Failed != 0 || done.Status.Active != 0 || done.Status.CompletionTime == nil || done.Status.StartTime == nil {
		t.Errorf("status %+v: want succeeded 4, failed 0, active 0, start and completion times", done.Status)
	}
	if u := done.Status.UncountedTerminatedPods; u != nil && len(u.Succeeded)+len(u.Failed) > 0 {
		t.Errorf("uncounted pods left: %+v", u)
	}
	pods := jobPods(t, env, ns, j.UID)
	if len(pods) != 4 {
		t.Fatalf("%d pods, want 4", len(pods))
	}
	for _, p := range pods {
		if hasJobTrackingFinalizer(&p) {
			t.Errorf("pod %s keeps the tracking finalizer", p.Name)
		}
	}
	// On the log: every pod was created with the finalizer and a cause,
	// and no more than parallelism ran at once.
	running := map[string]bool{}
	most := 0
	for _, ev := range podEvents(t, env, ns) {
		p := podOf(t, ev)
		if ev.Type == events.Added {
			if !hasJobTrackingFinalizer(p) {
				t.Errorf("pod %s created without the tracking finalizer", p.Name)
			}
			if ev.CausationID == "" {
				t.Errorf("pod %s created without a cause", p.Name)
			}
		}
		running[p.Name] = ev.Type != events.Deleted && isActive(p)
		n := 0
		for _, r := range running {
			if r {
				n++
			}
		}
		most = max(most, n)
	}
	if most > 2 {
		t.Errorf("%d pods active at once, parallelism is 2", most)
	}
	if n := len(controlplanetest.ListEvents(t, env, ns, "pi", "SuccessfulCreate")); n != 4 {
		t.Errorf("%d SuccessfulCreate events, want 4", n)
	}
	controlplanetest.WaitForEvent(t, env, ns, "pi", "Completed")
}

// TestJobIndexed: an Indexed Job of 4 completions, parallelism 2 runs each
// index exactly once, with the index in the annotation, the label, the
// hostname NAME-INDEX and JOB_COMPLETION_INDEX; completedIndexes "0-3".
func TestJobIndexed(t *testing.T) {
	const ns = "indexed"
	env := start(t, ns, Options{})
	runKubelet(t, env, ns, succeed)
	in := newJob(ns, "idx", ptr[int32](4), ptr[int32](2))
	in.Spec.CompletionMode = ptr(batchv1.IndexedCompletion)
	j := createJob(t, env, in)
	done := waitJob(t, env, ns, "idx", "Complete", func(j *batchv1.Job) bool { return hasCondition(j, batchv1.JobComplete, "") })
	if done.Status.CompletedIndexes != "0-3" || done.Status.Succeeded != 4 {
		t.Errorf("completedIndexes %q succeeded %d: want 0-3, 4", done.Status.CompletedIndexes, done.Status.Succeeded)
	}
	pods := jobPods(t, env, ns, j.UID)
	seen := map[int]bool{}
	for _, p := range pods {
		ix := getCompletionIndex(p.Annotations)
		if seen[ix] {
			t.Errorf("index %d ran twice", ix)
		}
		seen[ix] = true
		if p.Labels[batchv1.JobCompletionIndexAnnotation] != strconv.Itoa(ix) {
			t.Errorf("pod %s: label %q, want %d", p.Name, p.Labels[batchv1.JobCompletionIndexAnnotation], ix)
		}
		if want := fmt.Sprintf("idx-%d", ix); p.Spec.Hostname != want {
			t.Errorf("pod %s: hostname %q, want %q", p.Name, p.Spec.Hostname, want)
		}
		env := p.Spec.Containers[0].Env
		if len(env) != 1 || env[0].Name != "JOB_COMPLETION_INDEX" || env[0].ValueFrom == nil || env[0].ValueFrom.FieldRef == nil {
			t.Errorf("pod %s: env %+v, want JOB_COMPLETION_INDEX from the label", p.Name, env)
		}
	}
	if len(pods) != 4 || len(seen) != 4 {
		t.Errorf("%d pods for %d indexes, want 4 and 4", len(pods), len(seen))
	}
}

// TestJobBackoffLimitExceeded: a Job whose pods always fail stops after
// backoffLimit+1 failures with FailureTarget then Failed,
// BackoffLimitExceeded, and a Warning Event of that reason.
func TestJobBackoffLimitExceeded(t *testing.T) {
	const ns = "backoff"
	env := start(t, ns, Options{})
	runKubelet(t, env, ns, fail)
	in := newJob(ns, "fails", nil, nil)
	in.Spec.BackoffLimit = ptr[int32](2)
	j := createJob(t, env, in)
	done := waitJob(t, env, ns, "fails", "Failed", func(j *batchv1.Job) bool { return hasCondition(j, batchv1.JobFailed, "") })
	if !hasCondition(done, batchv1.JobFailed, batchv1.JobReasonBackoffLimitExceeded) || !hasCondition(done, batchv1.JobFailureTarget, batchv1.JobReasonBackoffLimitExceeded) {
		t.Errorf("conditions %+v: want FailureTarget and Failed BackoffLimitExceeded", done.Status.Conditions)
	}
	if done.Status.Failed != 3 || done.Status.Active != 0 || done.Status.CompletionTime != nil {
		t.Errorf("status %+v: want failed 3, active 0, no completionTime", done.Status)
	}
	if n := len(jobPods(t, env, ns, j.UID)); n != 3 {
		t.Errorf("%d pods, want 3", n)
	}
	ev := controlplanetest.WaitForEvent(t, env, ns, "fails", batchv1.JobReasonBackoffLimitExceeded)
	if ev.Type != corev1.EventTypeWarning || ev.Message != "Job has reached the specified backoff limit" {
		t.Errorf("event %s %q", ev.Type, ev.Message)
	}
}

// TestJobDeadline: activeDeadlineSeconds 1 with pods that keep running:
// the pods are deleted, counted failed, and the Job fails with
// DeadlineExceeded.
func TestJobDeadline(t *testing.T) {
	const ns = "deadline"
	env := start(t, ns, Options{})
	runKubelet(t, env, ns, keep)
	in := newJob(ns, "slow", ptr[int32](2), ptr[int32](2))
	in.Spec.ActiveDeadlineSeconds = ptr[int64](1)
	j := createJob(t, env, in)
	done := waitJob(t, env, ns, "slow", "Failed", func(j *batchv1.Job) bool { return hasCondition(j, batchv1.JobFailed, "") })
	if !hasCondition(done, batchv1.JobFailed, batchv1.JobReasonDeadlineExceeded) {
		t.Errorf("conditions %+v: want Failed DeadlineExceeded", done.Status.Conditions)
	}
	if done.Status.Active != 0 || done.Status.Failed != 2 {
		t.Errorf("status %+v: want active 0, failed 2", done.Status)
	}
	controlplanetest.Eventually(t, wait, "pods gone", func() bool { return len(jobPods(t, env, ns, j.UID)) == 0 })
	controlplanetest.WaitForEvent(t, env, ns, "slow", batchv1.JobReasonDeadlineExceeded)
}

// TestJobSuspendResume: a Job created suspended has no pods and
// Suspended=True (JobSuspended); suspending a running Job deletes its
// pods without counting them failed; resuming creates them again and
// resets startTime (JobResumed).
func TestJobSuspendResume(t *testing.T) {
	const ns = "suspend"
	env := start(t, ns, Options{})
	k := runKubelet(t, env, ns, keep)
	in := newJob(ns, "later", ptr[int32](2), ptr[int32](2))
	in.Spec.Suspend = ptr(true)
	j := createJob(t, env, in)
	s := waitJob(t, env, ns, "later", "Suspended", func(j *batchv1.Job) bool { return hasCondition(j, batchv1.JobSuspended, "JobSuspended") })
	if s.Status.StartTime != nil || len(jobPods(t, env, ns, j.UID)) != 0 {
		t.Fatalf("suspended job has a startTime or pods: %+v", s.Status)
	}
	updateJob(t, env, ns, "later", func(j *batchv1.Job) { j.Spec.Suspend = ptr(false) })
	r := waitJob(t, env, ns, "later", "resumed with 2 active", func(j *batchv1.Job) bool {
		c := findConditionByType(j.Status.Conditions, batchv1.JobSuspended)
		return c != nil && c.Status == corev1.ConditionFalse && c.Reason == "JobResumed" && j.Status.Active == 2
	})
	if r.Status.StartTime == nil {
		t.Error("resumed job has no startTime")
	}
	updateJob(t, env, ns, "later", func(j *batchv1.Job) { j.Spec.Suspend = ptr(true) })
	waitJob(t, env, ns, "later", "suspended again with no pods", func(j *batchv1.Job) bool {
		return hasCondition(j, batchv1.JobSuspended, "JobSuspended") && j.Status.Active == 0 && len(jobPods(t, env, ns, j.UID)) == 0
	})
	if got := getJob(t, env, ns, "later"); got.Status.Failed != 0 {
		t.Errorf("suspending counted %d failures", got.Status.Failed)
	}
	controlplanetest.WaitForEvent(t, env, ns, "later", "Suspended")
	controlplanetest.WaitForEvent(t, env, ns, "later", "Resumed")
	updateJob(t, env, ns, "later", func(j *batchv1.Job) { j.Spec.Suspend = ptr(false) })
	k.setDecide(succeed)
	waitJob(t, env, ns, "later", "Complete", func(j *batchv1.Job) bool { return hasCondition(j, batchv1.JobComplete, "") })
}

// TestJobPodFailurePolicy ports kube's pod failure policy cases: FailJob
// on an exit code fails the Job at once (PodFailurePolicy), Ignore on a
// DisruptionTarget condition does not count towards backoffLimit 0, Count
// does.
func TestJobPodFailurePolicy(t *testing.T) {
	const ns = "podfailurepolicy"
	env := start(t, ns, Options{})
	policy := &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{
		{Action: batchv1.PodFailurePolicyActionFailJob, OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{
			Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{42}}},
		{Action: batchv1.PodFailurePolicyActionIgnore, OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{
			{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue}}},
		{Action: batchv1.PodFailurePolicyActionCount, OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{
			Operator: batchv1.PodFailurePolicyOnExitCodesOpNotIn, Values: []int32{0}}},
	}}
	// Per job name: the first pod's outcome; later pods succeed.
	first := map[string]*outcome{
		"failjob": {phase: corev1.PodFailed, exitCode: 42},
		"ignore": {phase: corev1.PodFailed, exitCode: 137, conditions: []corev1.PodCondition{
			{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue}}},
		"count": {phase: corev1.PodFailed, exitCode: 3},
	}
	seen := map[string]bool{}
	runKubelet(t, env, ns, func(p *corev1.Pod) *outcome {
		name := metav1ControllerName(p)
		if !seen[name] {
			seen[name] = true
			return first[name]
		}
		return &outcome{phase: corev1.PodSucceeded}
	})
	for name := range first {
		in := newJob(ns, name, ptr[int32](1), ptr[int32](1))
		in.Spec.BackoffLimit = ptr[int32](0)
		in.Spec.PodFailurePolicy = policy
		in.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever
		createJob(t, env, in)
	}
	tests := []struct {
		name       string
		wantType   batchv1.JobConditionType
		wantReason string
		wantFailed int32
	}{
		{"failjob", batchv1.JobFailed, batchv1.JobReasonPodFailurePolicy, 1},
		{"ignore", batchv1.JobComplete, batchv1.JobReasonCompletionsReached, 0},
		{"count", batchv1.JobFailed, batchv1.JobReasonBackoffLimitExceeded, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := waitJob(t, env, ns, tt.name, "finished", isJobFinished)
			if !hasCondition(j, tt.wantType, tt.wantReason) || j.Status.Failed != tt.wantFailed {
				t.Errorf("conditions %+v failed %d: want %s %s, failed %d", j.Status.Conditions, j.Status.Failed, tt.wantType, tt.wantReason, tt.wantFailed)
			}
		})
	}
}

func metav1ControllerName(p *corev1.Pod) string {
	for _, r := range p.OwnerReferences {
		if r.Controller != nil && *r.Controller {
			return r.Name
		}
	}
	return ""
}

// TestJobOrphanedPodsReleased: a Job deleted with orphan propagation
// (batch/v1's default) leaves pods without a controller; their tracking
// finalizer is removed, as kube's syncOrphanPod does.
func TestJobOrphanedPodsReleased(t *testing.T) {
	const ns = "orphans"
	env := start(t, ns, Options{})
	j := createJob(t, env, newJob(ns, "left", ptr[int32](2), ptr[int32](2)))
	controlplanetest.Eventually(t, wait, "2 pods", func() bool { return len(jobPods(t, env, ns, j.UID)) == 2 })
	pods := jobPods(t, env, ns, j.UID)
	// The garbage collector does not run here: orphan by hand, as it would.
	for _, p := range pods {
		p.OwnerReferences = nil
		if _, err := env.Client.CoreV1().Pods(ns).Update(context.Background(), &p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := env.Client.BatchV1().Jobs(ns).Delete(context.Background(), "left", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		controlplanetest.Eventually(t, wait, "finalizer of "+p.Name+" removed", func() bool {
			cur := controlplanetest.GetPod(t, env, ns, p.Name)
			return !hasJobTrackingFinalizer(cur)
		})
	}
}

// TestJobBackoffLimitPerIndex: an Indexed Job whose index 1 always fails,
// with backoffLimitPerIndex 1: index 1 runs twice (the second pod carries
// the index's failure count), then is a failed index and the Job fails
// with FailedIndexes; the other indexes complete.
func TestJobBackoffLimitPerIndex(t *testing.T) {
	const ns = "perindex"
	env := start(t, ns, Options{})
	runKubelet(t, env, ns, func(p *corev1.Pod) *outcome {
		if getCompletionIndex(p.Annotations) == 1 {
			return &outcome{phase: corev1.PodFailed, exitCode: 1}
		}
		return &outcome{phase: corev1.PodSucceeded}
	})
	in := newJob(ns, "per", ptr[int32](3), ptr[int32](3))
	in.Spec.CompletionMode = ptr(batchv1.IndexedCompletion)
	in.Spec.BackoffLimit = nil
	in.Spec.BackoffLimitPerIndex = ptr[int32](1)
	j := createJob(t, env, in)
	done := waitJob(t, env, ns, "per", "Failed", func(j *batchv1.Job) bool { return hasCondition(j, batchv1.JobFailed, "") })
	if !hasCondition(done, batchv1.JobFailed, batchv1.JobReasonFailedIndexes) {
		t.Errorf("conditions %+v: want Failed FailedIndexes", done.Status.Conditions)
	}
	if done.Status.FailedIndexes == nil || *done.Status.FailedIndexes != "1" || done.Status.CompletedIndexes != "0,2" || done.Status.Failed != 2 {
		t.Errorf("status %+v: want failedIndexes 1, completedIndexes 0,2, failed 2", done.Status)
	}
	var counts []string
	for _, p := range jobPods(t, env, ns, j.UID) {
		if getCompletionIndex(p.Annotations) == 1 {
			counts = append(counts, p.Annotations[batchv1.JobIndexFailureCountAnnotation])
		}
	}
	slices.Sort(counts)
	if !slices.Equal(counts, []string{"0", "1"}) {
		t.Errorf("failure counts of index 1's pods %v, want [0 1]", counts)
	}
}

// TestJobSuccessPolicy: an Indexed Job of 4 whose successPolicy needs
// index 0 only: once it succeeds the Job meets its success criteria
// (SuccessPolicy), the other pods are deleted, and it completes.
func TestJobSuccessPolicy(t *testing.T) {
	const ns = "successpolicy"
	env := start(t, ns, Options{})
	runKubelet(t, env, ns, func(p *corev1.Pod) *outcome {
		if getCompletionIndex(p.Annotations) == 0 {
			return &outcome{phase: corev1.PodSucceeded}
		}
		return nil
	})
	in := newJob(ns, "leader", ptr[int32](4), ptr[int32](4))
	in.Spec.CompletionMode = ptr(batchv1.IndexedCompletion)
	in.Spec.SuccessPolicy = &batchv1.SuccessPolicy{Rules: []batchv1.SuccessPolicyRule{{SucceededIndexes: ptr("0")}}}
	j := createJob(t, env, in)
	done := waitJob(t, env, ns, "leader", "Complete", func(j *batchv1.Job) bool { return hasCondition(j, batchv1.JobComplete, "") })
	if !hasCondition(done, batchv1.JobSuccessCriteriaMet, batchv1.JobReasonSuccessPolicy) || !hasCondition(done, batchv1.JobComplete, batchv1.JobReasonSuccessPolicy) {
		t.Errorf("conditions %+v: want SuccessCriteriaMet and Complete with SuccessPolicy", done.Status.Conditions)
	}
	if done.Status.CompletedIndexes != "0" || done.Status.Active != 0 {
		t.Errorf("status %+v: want completedIndexes 0, active 0", done.Status)
	}
	controlplanetest.Eventually(t, wait, "other pods gone", func() bool { return len(jobPods(t, env, ns, j.UID)) == 1 })
}
