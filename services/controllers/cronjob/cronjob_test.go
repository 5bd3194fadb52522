package cronjob

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/events/consumer/consumertest"
	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const wait = 30 * time.Second

// fakeClock is a fixed time the test moves.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// start runs a control plane and `replicas` CronJob controllers (each
// handling every key: the worst race) on clock, and creates namespace ns.
// The clock starts 5 s into the minute after next.
func start(t *testing.T, ns string, replicas int) (*controlplanetest.Env, *fakeClock) {
	t.Helper()
	env := controlplanetest.Start(t)
	clock := &fakeClock{t: time.Now().Add(2 * time.Minute).Truncate(time.Minute).Add(5 * time.Second)}
	for range replicas {
		m := consumertest.Manager(t, env, controlplanetest.ControllerToken, controlplanetest.Logger("CRONJOB_TEST_LOG"), nil)
		if _, err := New(m, Options{Clock: clock.Now}); err != nil {
			t.Fatal(err)
		}
		controlplanetest.RunSynced(t, m)
	}
	if _, err := env.Client.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return env, clock
}

func newCronJob(ns, name string, policy batchv1.ConcurrencyPolicy) *batchv1.CronJob {
	return &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: batchv1.CronJobSpec{Schedule: "* * * * *", ConcurrencyPolicy: policy,
			JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}}}},
	}
}

func createCronJob(t *testing.T, env *controlplanetest.Env, cj *batchv1.CronJob) *batchv1.CronJob {
	t.Helper()
	got, err := env.Client.BatchV1().CronJobs(cj.Namespace).Create(context.Background(), cj, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create cronjob: %v", err)
	}
	return got
}

func getCronJob(t *testing.T, env *controlplanetest.Env, ns, name string) *batchv1.CronJob {
	t.Helper()
	cj, err := env.Client.BatchV1().CronJobs(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get cronjob: %v", err)
	}
	return cj
}

// tick moves the clock to 5 s into the next minute and touches the
// CronJob, whose event queues it (its own requeue runs on real time). It
// returns the new scheduled time.
func tick(t *testing.T, env *controlplanetest.Env, clock *fakeClock, ns, name string) time.Time {
	t.Helper()
	next := clock.Now().Truncate(time.Minute).Add(time.Minute + 5*time.Second)
	clock.set(next)
	touch(t, env, ns, name)
	return next.Truncate(time.Minute)
}

// touch updates an annotation of the CronJob so that its event queues it.
func touch(t *testing.T, env *controlplanetest.Env, ns, name string) {
	t.Helper()
	for {
		cj := getCronJob(t, env, ns, name)
		if cj.Annotations == nil {
			cj.Annotations = map[string]string{}
		}
		cj.Annotations["test/touch"] = time.Now().Format(time.RFC3339Nano)
		_, err := env.Client.BatchV1().CronJobs(ns).Update(context.Background(), cj, metav1.UpdateOptions{})
		if err == nil {
			return
		}
		if !apierrors.IsConflict(err) {
			t.Fatalf("touch cronjob: %v", err)
		}
	}
}

// jobsOf lists the Jobs the CronJob controls, by name.
func jobsOf(t *testing.T, env *controlplanetest.Env, ns string, uid types.UID) map[string]batchv1.Job {
	t.Helper()
	l, err := env.Client.BatchV1().Jobs(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list jobs: %v", err)
	}
	out := map[string]batchv1.Job{}
	for _, j := range l.Items {
		if ref := metav1.GetControllerOf(&j); ref != nil && ref.UID == uid && j.DeletionTimestamp == nil {
			out[j.Name] = j
		}
	}
	return out
}

func waitJobNamed(t *testing.T, env *controlplanetest.Env, cj *batchv1.CronJob, scheduled time.Time) batchv1.Job {
	t.Helper()
	name := getJobName(cj, scheduled)
	var j batchv1.Job
	controlplanetest.Eventually(t, wait, "job "+name, func() bool {
		var ok bool
		j, ok = jobsOf(t, env, cj.Namespace, cj.UID)[name]
		return ok
	})
	return j
}

// finish sets the Job's status as the Job controller would: Complete or
// Failed with its interim condition.
func finish(t *testing.T, env *controlplanetest.Env, j batchv1.Job, ok bool, at time.Time) {
	t.Helper()
	now := metav1.NewTime(at)
	for {
		cur, err := env.Client.BatchV1().Jobs(j.Namespace).Get(context.Background(), j.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get job: %v", err)
		}
		cur.Status.StartTime = &now
		if ok {
			cur.Status.Succeeded = 1
			cur.Status.CompletionTime = &now
			cur.Status.Conditions = []batchv1.JobCondition{
				{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now},
				{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now}}
		} else {
			cur.Status.Failed = 1
			cur.Status.Conditions = []batchv1.JobCondition{
				{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", LastTransitionTime: now},
				{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", LastTransitionTime: now}}
		}
		_, err = env.Client.BatchV1().Jobs(j.Namespace).UpdateStatus(context.Background(), cur, metav1.UpdateOptions{})
		if err == nil {
			return
		}
		if !apierrors.IsConflict(err) {
			t.Fatalf("finish job %s: %v", j.Name, err)
		}
	}
}

// TestCronJobSchedulesAndHistory: a CronJob "* * * * *" creates the Job
// of the most recent minute, named NAME-<minutes> with the
// scheduled-timestamp annotation, caused by the CronJob's event; its
// status follows (active, lastScheduleTime, lastSuccessfulTime), and only
// successfulJobsHistoryLimit and failedJobsHistoryLimit finished Jobs are
// kept.
func TestCronJobSchedulesAndHistory(t *testing.T) {
	const ns = "history"
	env, clock := start(t, ns, 1)
	in := newCronJob(ns, "tick", batchv1.AllowConcurrent)
	in.Spec.SuccessfulJobsHistoryLimit = ptr[int32](1)
	in.Spec.FailedJobsHistoryLimit = ptr[int32](1)
	cj := createCronJob(t, env, in)

	first := clock.Now().Truncate(time.Minute)
	j := waitJobNamed(t, env, cj, first)
	if got := j.Annotations[batchv1.CronJobScheduledTimestampAnnotation]; got != first.UTC().Format(time.RFC3339) {
		t.Errorf("scheduled timestamp %q, want %q", got, first.Format(time.RFC3339))
	}
	controlplanetest.Eventually(t, wait, "status.active and lastScheduleTime", func() bool {
		s := getCronJob(t, env, ns, "tick").Status
		return len(s.Active) == 1 && s.Active[0].UID == j.UID && s.LastScheduleTime != nil && s.LastScheduleTime.Time.Equal(first)
	})
	controlplanetest.WaitForEvent(t, env, ns, "tick", "SuccessfulCreate")
	if ev := jobEvent(t, env, ns, j.Name); ev.CausationID == "" {
		t.Error("job created without a cause")
	}

	// Minute 2 succeeds after minute 1 succeeded: one Complete Job kept.
	finish(t, env, j, true, clock.Now())
	second := tick(t, env, clock, ns, "tick")
	j2 := waitJobNamed(t, env, cj, second)
	finish(t, env, j2, true, clock.Now())
	third := tick(t, env, clock, ns, "tick")
	j3 := waitJobNamed(t, env, cj, third)
	controlplanetest.Eventually(t, wait, "the oldest succeeded job deleted", func() bool {
		jobs := jobsOf(t, env, ns, cj.UID)
		_, old := jobs[j.Name]
		_, kept := jobs[j2.Name]
		return !old && kept
	})
	controlplanetest.WaitForEvent(t, env, ns, "tick", "SawCompletedJob")
	controlplanetest.WaitForEvent(t, env, ns, "tick", "SuccessfulDelete")
	s := getCronJob(t, env, ns, "tick").Status
	if s.LastSuccessfulTime == nil {
		t.Error("no lastSuccessfulTime")
	}
	// Two failures: one Failed Job kept.
	finish(t, env, j3, false, clock.Now())
	fourth := tick(t, env, clock, ns, "tick")
	j4 := waitJobNamed(t, env, cj, fourth)
	finish(t, env, j4, false, clock.Now())
	tick(t, env, clock, ns, "tick")
	controlplanetest.Eventually(t, wait, "one failed job kept", func() bool {
		jobs := jobsOf(t, env, ns, cj.UID)
		_, old := jobs[j3.Name]
		_, kept := jobs[j4.Name]
		_, succeeded := jobs[j2.Name]
		return !old && kept && succeeded
	})
}

// TestCronJobConcurrencyPolicy: Forbid skips a time while a Job is active
// (JobAlreadyActive); Replace deletes the active Job and starts the new
// one; Allow runs both.
func TestCronJobConcurrencyPolicy(t *testing.T) {
	const ns = "concurrency"
	env, clock := start(t, ns, 1)
	forbid := createCronJob(t, env, newCronJob(ns, "forbid", batchv1.ForbidConcurrent))
	replace := createCronJob(t, env, newCronJob(ns, "replace", batchv1.ReplaceConcurrent))
	allow := createCronJob(t, env, newCronJob(ns, "allow", batchv1.AllowConcurrent))
	first := clock.Now().Truncate(time.Minute)
	fj := waitJobNamed(t, env, forbid, first)
	rj := waitJobNamed(t, env, replace, first)
	aj := waitJobNamed(t, env, allow, first)
	for _, name := range []string{"forbid", "replace", "allow"} {
		controlplanetest.Eventually(t, wait, name+" active", func() bool { return len(getCronJob(t, env, ns, name).Status.Active) == 1 })
	}
	second := tick(t, env, clock, ns, "forbid")
	touch(t, env, ns, "replace")
	touch(t, env, ns, "allow")
	controlplanetest.WaitForEvent(t, env, ns, "forbid", "JobAlreadyActive")
	rj2 := waitJobNamed(t, env, replace, second)
	aj2 := waitJobNamed(t, env, allow, second)
	controlplanetest.Eventually(t, wait, "replace deleted its old job", func() bool {
		_, ok := jobsOf(t, env, ns, replace.UID)[rj.Name]
		return !ok
	})
	if jobs := jobsOf(t, env, ns, forbid.UID); len(jobs) != 1 || jobs[fj.Name].UID != fj.UID {
		t.Errorf("forbid has jobs %v, want only %s", keys(jobs), fj.Name)
	}
	if jobs := jobsOf(t, env, ns, allow.UID); len(jobs) != 2 {
		t.Errorf("allow has jobs %v, want %s and %s", keys(jobs), aj.Name, aj2.Name)
	}
	s := getCronJob(t, env, ns, "replace").Status
	if len(s.Active) != 1 || s.Active[0].UID != rj2.UID {
		t.Errorf("replace active %+v, want only %s", s.Active, rj2.Name)
	}
}

// TestCronJobFiresOnce: three controllers handle the same CronJob at once
// across four minutes; on the log every scheduled time has exactly one
// Job, and status.active lists each once.
func TestCronJobFiresOnce(t *testing.T) {
	const ns = "once"
	env, clock := start(t, ns, 3)
	cj := createCronJob(t, env, newCronJob(ns, "racy", batchv1.AllowConcurrent))
	times := []time.Time{clock.Now().Truncate(time.Minute)}
	waitJobNamed(t, env, cj, times[0])
	for range 3 {
		times = append(times, tick(t, env, clock, ns, "racy"))
		waitJobNamed(t, env, cj, times[len(times)-1])
	}
	controlplanetest.Eventually(t, wait, "4 active jobs", func() bool { return len(getCronJob(t, env, ns, "racy").Status.Active) == 4 })
	controlplanetest.WaitForLog(t, env)
	created := map[string]int{}
	err := events.Tail(context.Background(), env.JS, events.TailOptions{Group: "batch", Resource: "jobs", Namespace: ns}, func(ev *events.Event) error {
		if ev.Type != events.Added {
			return nil
		}
		var j batchv1.Job
		if err := json.Unmarshal(ev.Object, &j); err != nil {
			return err
		}
		created[j.Annotations[batchv1.CronJobScheduledTimestampAnnotation]]++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(created) != len(times) {
		t.Errorf("jobs for %d scheduled times, want %d: %v", len(created), len(times), created)
	}
	for _, at := range times {
		if n := created[at.UTC().Format(time.RFC3339)]; n != 1 {
			t.Errorf("scheduled time %v fired %d times", at, n)
		}
	}
	seen := map[types.UID]bool{}
	for _, r := range getCronJob(t, env, ns, "racy").Status.Active {
		if seen[r.UID] {
			t.Errorf("job %s twice in status.active", r.Name)
		}
		seen[r.UID] = true
	}
}

// TestCronJobSuspend: a suspended CronJob creates nothing.
func TestCronJobSuspend(t *testing.T) {
	const ns = "suspended"
	env, clock := start(t, ns, 1)
	in := newCronJob(ns, "off", batchv1.AllowConcurrent)
	in.Spec.Suspend = ptr(true)
	cj := createCronJob(t, env, in)
	tick(t, env, clock, ns, "off")
	time.Sleep(time.Second)
	if jobs := jobsOf(t, env, ns, cj.UID); len(jobs) != 0 {
		t.Fatalf("suspended cronjob made jobs %v", keys(jobs))
	}
	for {
		cur := getCronJob(t, env, ns, "off")
		cur.Spec.Suspend = ptr(false)
		if _, err := env.Client.BatchV1().CronJobs(ns).Update(context.Background(), cur, metav1.UpdateOptions{}); err == nil {
			break
		} else if !apierrors.IsConflict(err) {
			t.Fatal(err)
		}
	}
	waitJobNamed(t, env, cj, clock.Now().Truncate(time.Minute))
}

func jobEvent(t *testing.T, env *controlplanetest.Env, ns, name string) *events.Event {
	t.Helper()
	controlplanetest.WaitForLog(t, env)
	var found *events.Event
	err := events.Tail(context.Background(), env.JS, events.TailOptions{Group: "batch", Resource: "jobs", Namespace: ns, Name: name}, func(ev *events.Event) error {
		if found == nil && ev.Type == events.Added {
			found = ev
		}
		return nil
	})
	if err != nil || found == nil {
		t.Fatalf("no ADDED event of job %s: %v", name, err)
	}
	return found
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
