package e2etest

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cairn-dev/cairn/services/cairn/cairntest"
)

// batchJobs are an Indexed Job of 4 completions at parallelism 2 whose
// pods print their JOB_COMPLETION_INDEX, a Job whose pods always exit 1
// (backoffLimit 1), and a CronJob firing every minute that keeps one
// successful Job; all of the offline busybox image.
const batchJobs = `apiVersion: batch/v1
kind: Job
metadata:
  name: indexed
spec:
  completions: 4
  parallelism: 2
  completionMode: Indexed
  template:
    spec:
      restartPolicy: Never
      terminationGracePeriodSeconds: 1
      containers:
      - name: c
        image: cairn.local/busybox:1.36
        imagePullPolicy: IfNotPresent
        command: ["sh", "-c", "echo index $JOB_COMPLETION_INDEX"]
---
apiVersion: batch/v1
kind: Job
metadata:
  name: fails
spec:
  backoffLimit: 1
  template:
    spec:
      restartPolicy: Never
      terminationGracePeriodSeconds: 1
      containers:
      - name: c
        image: cairn.local/busybox:1.36
        imagePullPolicy: IfNotPresent
        command: ["false"]
---
apiVersion: batch/v1
kind: CronJob
metadata:
  name: minutely
spec:
  schedule: "* * * * *"
  successfulJobsHistoryLimit: 1
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: Never
          terminationGracePeriodSeconds: 1
          containers:
          - name: c
            image: cairn.local/busybox:1.36
            imagePullPolicy: IfNotPresent
            command: ["true"]
`

// TestE2EJobs: on the real node of `cairn up`, with containers run by
// containerd, an Indexed Job of 4 completions at parallelism 2 completes
// with each index once (each pod's log prints its JOB_COMPLETION_INDEX);
// a Job whose container always exits 1 stops after backoffLimit 1 (two
// failed pods) with the condition Failed, reason BackoffLimitExceeded; a
// CronJob "* * * * *" creates its Job for a minute before the next minute
// comes, and once a later Job has succeeded keeps only its
// successfulJobsHistoryLimit (1) of them.
func TestE2EJobs(t *testing.T) {
	kubectl := requireNode(t)
	bin := cairntest.Build(t)
	c := startCluster(t, bin, kubectl, t.TempDir(), cairntest.FreeAddr(t))
	r := c.RunWith(t, batchJobs, callTimeout, "apply", "-f", "-")
	if r.Err != nil || !strings.Contains(r.Stdout, "cronjob.batch/minutely created") {
		t.Fatalf("apply: %s", r)
	}
	wait := func(cond, job string) {
		t.Helper()
		r := c.RunWith(t, "", 4*time.Minute, "wait", "--for=condition="+cond, "job/"+job, "--timeout=210s")
		if r.Err != nil || strings.TrimSpace(r.Stdout) != "job.batch/"+job+" condition met" {
			t.Fatalf("wait %s job/%s: %s\n%s\n%s", cond, job, r, c.Run(t, "get", "job", job, "-o", "yaml").Stdout,
				c.Run(t, "get", "pods", "-o", "wide").Stdout)
		}
	}

	t.Run("Indexed Job, each index once", func(t *testing.T) {
		wait("complete", "indexed")
		var j batchv1.Job
		getJSON(t, c, &j, "get", "job", "indexed")
		if j.Status.CompletedIndexes != "0-3" || j.Status.Succeeded != 4 || j.Status.Failed != 0 {
			t.Errorf("completedIndexes %q succeeded %d failed %d, want 0-3, 4, 0", j.Status.CompletedIndexes, j.Status.Succeeded, j.Status.Failed)
		}
		var indexes, printed []string
		for _, p := range c.pods(t, "job-name=indexed") {
			if p.Status.Phase != corev1.PodSucceeded {
				t.Errorf("pod %s: %s, want Succeeded (no retries)", p.Name, p.Status.Phase)
			}
			indexes = append(indexes, p.Annotations[batchv1.JobCompletionIndexAnnotation])
			printed = append(printed, strings.TrimSpace(c.OK(t, "logs", p.Name)))
		}
		slices.Sort(indexes)
		slices.Sort(printed)
		if !slices.Equal(indexes, []string{"0", "1", "2", "3"}) || !slices.Equal(printed, []string{"index 0", "index 1", "index 2", "index 3"}) {
			t.Errorf("pods' completion indexes %v, their logs %q: want each of 0-3 once", indexes, printed)
		}
	})

	t.Run("always failing Job stops at backoffLimit", func(t *testing.T) {
		wait("failed", "fails")
		var j batchv1.Job
		getJSON(t, c, &j, "get", "job", "fails")
		var reason string
		for _, cond := range j.Status.Conditions {
			if cond.Type == batchv1.JobFailed && cond.Status == corev1.ConditionTrue {
				reason = cond.Reason
			}
		}
		if reason != batchv1.JobReasonBackoffLimitExceeded || j.Status.Failed != 2 || j.Status.Active != 0 {
			t.Errorf("Failed reason %q, failed %d, active %d: want BackoffLimitExceeded, 2, 0", reason, j.Status.Failed, j.Status.Active)
		}
		if n := len(c.pods(t, "job-name=fails")); n != 2 {
			t.Errorf("%d pods, want 2 (backoffLimit 1)", n)
		}
		for _, p := range c.pods(t, "job-name=fails") {
			for _, s := range p.Status.ContainerStatuses {
				if s.State.Terminated == nil || s.State.Terminated.ExitCode != 1 {
					t.Errorf("pod %s container state %+v, want exited 1", p.Name, s.State)
				}
			}
		}
	})

	t.Run("CronJob fires each minute and keeps its history limit", func(t *testing.T) {
		// cronJobs are the Jobs of minutely, by name, and how many of them
		// succeeded.
		cronJobs := func() (map[string]batchv1.Job, int) {
			var l batchv1.JobList
			getJSON(t, c, &l, "get", "jobs")
			byName, succeeded := map[string]batchv1.Job{}, 0
			for _, j := range l.Items {
				if ref := metav1.GetControllerOf(&j); ref != nil && ref.Kind == "CronJob" && ref.Name == "minutely" {
					byName[j.Name] = j
					if j.Status.Succeeded > 0 {
						succeeded++
					}
				}
			}
			return byName, succeeded
		}
		var first batchv1.Job
		poll(t, 3*time.Minute, "minutely's first Job", func() error {
			jobs, _ := cronJobs()
			for _, j := range jobs {
				first = j
				return nil
			}
			return fmt.Errorf("no Job of minutely yet")
		})
		at, err := time.Parse(time.RFC3339, first.Annotations[batchv1.CronJobScheduledTimestampAnnotation])
		if err != nil || !at.Equal(at.Truncate(time.Minute)) {
			t.Fatalf("Job %s scheduled-timestamp %q (%v), want a whole minute", first.Name, first.Annotations[batchv1.CronJobScheduledTimestampAnnotation], err)
		}
		if created := first.CreationTimestamp.Time; created.Before(at) || !created.Before(at.Add(time.Minute)) {
			t.Errorf("Job %s for %v created at %v: want within that minute", first.Name, at, created)
		}
		// A later Job succeeds; the first then goes, one successful Job
		// kept.
		poll(t, 4*time.Minute, "a later Job of minutely succeeded and the first gone", func() error {
			jobs, succeeded := cronJobs()
			if _, ok := jobs[first.Name]; ok || succeeded != 1 {
				names := make([]string, 0, len(jobs))
				for n, j := range jobs {
					names = append(names, fmt.Sprintf("%s(succeeded %d)", n, j.Status.Succeeded))
				}
				return fmt.Errorf("jobs of minutely: %v (first %s)", names, first.Name)
			}
			return nil
		})
		c.OK(t, "patch", "cronjob", "minutely", "-p", `{"spec":{"suspend":true}}`)
	})
	c.OK(t, "delete", "cronjob/minutely", "job/indexed", "job/fails")
	c.stop(t)
}
