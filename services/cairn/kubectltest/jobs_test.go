package kubectltest

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/cairn-dev/cairn/services/cairn/cairntest"
)

// jobManifest is a Job of busybox running command, with more spec lines.
func jobManifest(name, spec, command string) string {
	return "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: " + name + "\nspec:\n" + spec +
		"  template:\n    spec:\n      restartPolicy: Never\n      containers:\n      - name: c\n        image: busybox:1.36\n" +
		"        command: [\"" + command + "\"]\n"
}

var (
	indexedJob = jobManifest("indexed", "  completions: 4\n  parallelism: 2\n  completionMode: Indexed\n", "true")
	failingJob = jobManifest("fails", "  backoffLimit: 1\n", "false")
)

// TestKubectlJobs drives Jobs through the real kubectl against a `cairn
// up` of its own, with a stand-in kubelet whose containers exit 0, or 1
// for `false`: an Indexed Job of 4 completions and parallelism 2 completes
// (`kubectl wait --for=condition=complete`) with each index once; a Job
// that always fails stops after backoffLimit with BackoffLimitExceeded
// (`kubectl wait --for=condition=failed`, describe); a Job made from a
// CronJob (`kubectl create job --from=cronjob/...`) runs to completion.
func TestKubectlJobs(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cairn and runs cairn up; skipped with -short")
	}
	kubectl := cairntest.KubectlPath(t)
	bin := cairntest.Build(t)
	dir := t.TempDir()
	c := startCluster(t, t, bin, kubectl, filepath.Join(dir, "data"), cairntest.FreeAddr(t), filepath.Join(dir, "home"))
	cairntest.StartKubelet(t, c.Up.Kubeconfig(), cairntest.KubeletConfig{FinishDeletes: true,
		Exit: func(p *corev1.Pod) (int32, bool) {
			if slices.Contains(p.Spec.Containers[0].Command, "false") {
				return 1, true
			}
			return 0, true
		}})
	wait := func(cond, job string) {
		t.Helper()
		r := c.RunWith(t, "", 90*time.Second, "wait", "--for=condition="+cond, "job/"+job, "--timeout=75s")
		if r.Err != nil || strings.TrimSpace(r.Stdout) != "job.batch/"+job+" condition met" {
			t.Fatalf("wait %s job/%s: %s\n%s", cond, job, r, c.Run(t, "get", "job", job, "-o", "yaml").Stdout)
		}
	}

	if got := strings.TrimSpace(c.RunWith(t, indexedJob, callTimeout, "apply", "-f", "-").Stdout); got != "job.batch/indexed created" {
		t.Fatalf("apply indexed job: %q", got)
	}
	wait("complete", "indexed")
	rows := wantHeader(t, c.OK(t, "get", "job", "indexed"), "NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE")
	wantRow(t, rows, "indexed", "Complete", "4/4")
	if got := jsonpath(t, c, "{.status.completedIndexes} {.status.succeeded}", "job", "indexed"); got != "0-3 4" {
		t.Errorf("completedIndexes and succeeded = %q, want 0-3 4", got)
	}
	idx := strings.Fields(jsonpath(t, c, `{range .items[*]}{.metadata.annotations.batch\.kubernetes\.io/job-completion-index} {end}`,
		"pods", "-l", "job-name=indexed"))
	slices.Sort(idx)
	if !slices.Equal(idx, []string{"0", "1", "2", "3"}) {
		t.Errorf("pods' completion indexes %v, want each of 0-3 once", idx)
	}

	if got := strings.TrimSpace(c.RunWith(t, failingJob, callTimeout, "apply", "-f", "-").Stdout); got != "job.batch/fails created" {
		t.Fatalf("apply failing job: %q", got)
	}
	wait("failed", "fails")
	rows = wantHeader(t, c.OK(t, "get", "job", "fails"), "NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE")
	wantRow(t, rows, "fails", "Failed", "0/1")
	desc := c.OK(t, "describe", "job", "fails")
	for _, want := range []string{"BackoffLimitExceeded", "Job has reached the specified backoff limit", "SuccessfulCreate"} {
		if !strings.Contains(desc, want) {
			t.Errorf("describe job fails lacks %q:\n%s", want, desc)
		}
	}
	if got := jsonpath(t, c, "{.status.failed}", "job", "fails"); got != "2" {
		t.Errorf("failed = %s, want 2 (backoffLimit 1)", got)
	}

	c.OK(t, "create", "cronjob", "yearly", "--image=busybox:1.36", "--schedule=0 0 1 1 *", "--", "true")
	c.OK(t, "create", "job", "now", "--from=cronjob/yearly")
	wait("complete", "now")
	c.OK(t, "delete", "cronjob/yearly", "job/indexed", "job/fails")
}
