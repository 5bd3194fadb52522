package kubectltest

import (
	"strings"
	"testing"
)

// workloadsYAML is a DaemonSet, a StatefulSet and a ControllerRevision of
// it; nothing runs their pods (this cairn up has no node: they stay
// Pending).
const workloadsYAML = `apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: agent
spec:
  selector:
    matchLabels: {app: agent}
  template:
    metadata:
      labels: {app: agent}
    spec:
      nodeSelector: {disk: ssd}
      containers:
      - name: agent
        image: busybox:1.36
        command: ["sleep", "3600"]
---
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: db
spec:
  serviceName: db
  replicas: 2
  selector:
    matchLabels: {app: db}
  template:
    metadata:
      labels: {app: db}
    spec:
      containers:
      - name: db
        image: busybox:1.36
        command: ["sleep", "3600"]
---
apiVersion: apps/v1
kind: ControllerRevision
metadata:
  name: db-1
revision: 1
data: {spec: {template: {metadata: {labels: {app: db}}}}}
`

// ssaCronJobYAML is a CronJob applied server-side, with SCHEDULE replaced.
const ssaCronJobYAML = `apiVersion: batch/v1
kind: CronJob
metadata:
  name: hourly
spec:
  schedule: "SCHEDULE"
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: OnFailure
          containers:
          - name: c
            image: busybox:1.36
`

// negativeCompletionsYAML is a Job kube refuses.
const negativeCompletionsYAML = `apiVersion: batch/v1
kind: Job
metadata:
  name: negative
spec:
  completions: -1
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: c
        image: busybox:1.36
`

// testWorkloads creates DaemonSets, StatefulSets, ControllerRevisions,
// Jobs and CronJobs with kubectl (create job, create cronjob, create job
// --from=cronjob), lists them as kubectl prints them, scales the
// StatefulSet, checks kube's error messages, and deletes them all again,
// so that the steps after it see the cluster as before.
func testWorkloads(t *testing.T, c *cluster) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"create", "job", "pi", "--image=busybox:1.36", "--", "true"}, "job.batch/pi created"},
		{[]string{"create", "cronjob", "nightly", "--image=busybox:1.36", "--schedule=0 3 1 1 *", "--", "true"}, "cronjob.batch/nightly created"},
		{[]string{"create", "job", "manual", "--from=cronjob/nightly"}, "job.batch/manual created"},
	} {
		if got := strings.TrimSpace(c.OK(t, tt.args...)); got != tt.want {
			t.Errorf("kubectl %s = %q, want %q", strings.Join(tt.args, " "), got, tt.want)
		}
	}
	r := c.RunWith(t, workloadsYAML, 0, "apply", "-f", "-")
	if r.Err != nil || !strings.Contains(r.Stdout, "daemonset.apps/agent created") || !strings.Contains(r.Stdout, "statefulset.apps/db created") ||
		!strings.Contains(r.Stdout, "controllerrevision.apps/db-1 created") {
		t.Fatalf("apply workloads: %s", r)
	}

	// Client-side apply patches through the OpenAPI schema (strategic
	// merge); server-side apply through the kinds' merge types.
	r = c.RunWith(t, strings.Replace(workloadsYAML, "name: db\n        image: busybox:1.36", "name: db\n        image: busybox:1.37", 1), 0, "apply", "-f", "-")
	if r.Err != nil || !strings.Contains(r.Stdout, "statefulset.apps/db configured") || !strings.Contains(r.Stdout, "daemonset.apps/agent unchanged") {
		t.Errorf("apply a new sts image: %s", r)
	}
	for _, schedule := range []string{"0 * * * *", "30 * * * *"} {
		r = c.RunWith(t, strings.Replace(ssaCronJobYAML, "SCHEDULE", schedule, 1), 0, "apply", "--server-side", "-f", "-")
		if r.Err != nil || strings.TrimSpace(r.Stdout) != "cronjob.batch/hourly serverside-applied" {
			t.Errorf("apply --server-side cronjob: %s", r)
		}
	}
	if got := c.OK(t, "get", "cj", "hourly", "-o", "jsonpath={.spec.schedule} {.metadata.generation}"); got != "30 * * * * 2" {
		t.Errorf("server-side applied cronjob: schedule and generation %q", got)
	}

	for _, tt := range []struct {
		args []string
		want []string
	}{
		{[]string{"describe", "job", "pi"}, []string{"Name:", "pi", "Parallelism:", "Completions:", "Completion Mode:  NonIndexed", "Pods Statuses:", "batch.kubernetes.io/controller-uid="}},
		{[]string{"describe", "cj", "nightly"}, []string{"Schedule:", "0 3 1 1 *", "Concurrency Policy:", "Allow", "Suspend:", "False"}},
		{[]string{"describe", "ds", "agent"}, []string{"Selector:", "app=agent", "Node-Selector:", "disk=ssd", "Desired Number of Nodes Scheduled: 0"}},
		{[]string{"describe", "sts", "db"}, []string{"Selector:", "app=db", "Replicas:", "Update Strategy:", "RollingUpdate", "busybox:1.37"}},
	} {
		out := c.OK(t, tt.args...)
		for _, w := range tt.want {
			if !strings.Contains(out, w) {
				t.Errorf("kubectl %s lacks %q:\n%s", strings.Join(tt.args, " "), w, out)
			}
		}
	}

	// kubectl read the CronJob and made its Job an owned, manual instance.
	got := c.OK(t, "get", "job", "manual", "-o", `jsonpath={.metadata.annotations.cronjob\.kubernetes\.io/instantiate} {.metadata.ownerReferences[0].kind}/{.metadata.ownerReferences[0].name} {.metadata.ownerReferences[0].controller} {.spec.template.spec.containers[0].image}`)
	if got != "manual CronJob/nightly true busybox:1.36" {
		t.Errorf("job from cronjob = %q", got)
	}
	uid := c.OK(t, "get", "job", "pi", "-o", "jsonpath={.metadata.uid}")
	if sel := c.OK(t, "get", "job", "pi", "-o", "jsonpath={.spec.selector.matchLabels}"); sel != `{"batch.kubernetes.io/controller-uid":"`+uid+`"}` {
		t.Errorf("job selector = %s, uid %s", sel, uid)
	}
	if got := c.OK(t, "get", "jobs", "-l", "job-name=pi", "-o", "name"); strings.TrimSpace(got) != "job.batch/pi" {
		t.Errorf("jobs labelled job-name=pi: %q", got)
	}

	rows := wantHeader(t, c.OK(t, "get", "jobs"), "NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE")
	wantRow(t, rows, "manual", "Running", "0/1")
	wantRow(t, rows, "pi", "Running", "0/1")
	rows = wantHeader(t, c.OK(t, "get", "cj"), "NAME", "SCHEDULE", "TIMEZONE", "SUSPEND", "ACTIVE", "LAST", "SCHEDULE", "AGE")
	wantRow(t, rows, "nightly", "0", "3", "1", "1", "*", "<none>", "False", "0", "<none>")
	rows = wantHeader(t, c.OK(t, "get", "ds", "-o", "wide"), "NAME", "DESIRED", "CURRENT", "READY", "UP-TO-DATE", "AVAILABLE",
		"NODE", "SELECTOR", "AGE", "CONTAINERS", "IMAGES", "SELECTOR")
	if len(rows) != 1 || rows[0][0] != "agent" || rows[0][6] != "disk=ssd" || rows[0][len(rows[0])-1] != "app=agent" {
		t.Errorf("get ds -o wide rows %q", rows)
	}
	rows = wantHeader(t, c.OK(t, "get", "sts", "-o", "wide"), "NAME", "READY", "AGE", "CONTAINERS", "IMAGES")
	wantRow(t, rows, "db", "0/2")

	all := c.OK(t, "get", "ds,sts,job,cj,controllerrevisions")
	for _, name := range []string{"daemonset.apps/agent", "statefulset.apps/db", "job.batch/pi", "job.batch/manual", "cronjob.batch/nightly", "controllerrevision.apps/db-1"} {
		if !strings.Contains(all, name) {
			t.Errorf("get ds,sts,job,cj,controllerrevisions lacks %s:\n%s", name, all)
		}
	}

	if got := strings.TrimSpace(c.OK(t, "scale", "sts", "db", "--replicas=3")); got != "statefulset.apps/db scaled" {
		t.Errorf("scale sts = %q", got)
	}
	if got := c.OK(t, "get", "sts", "db", "-o", "jsonpath={.spec.replicas} {.metadata.generation}"); got != "3 3" {
		t.Errorf("after scale: replicas and generation %q", got)
	}

	errs := []struct {
		name  string
		stdin string
		args  []string
		want  string
	}{
		{"negative completions", negativeCompletionsYAML, []string{"create", "-f", "-"},
			`The Job "negative" is invalid: spec.completions: Invalid value: -1: must be greater than or equal to 0`},
		{"bad schedule", "", []string{"create", "cronjob", "bad", "--image=busybox:1.36", "--schedule=every minute"},
			`error: failed to create cronjob: CronJob.batch "bad" is invalid: spec.schedule: Invalid value: "every minute": expected exactly 5 fields, found 2: [every minute]`},
		{"serviceName is immutable", "", []string{"patch", "sts", "db", "--type", "merge", "-p", `{"spec":{"serviceName":"other"}}`},
			`The StatefulSet "db" is invalid: spec: Forbidden: updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden`},
		{"job template is immutable", "", []string{"set", "image", "job/pi", "pi=busybox:1.37"},
			`spec.template: Invalid value:`},
	}
	for _, tt := range errs {
		t.Run(tt.name, func(t *testing.T) {
			r := c.RunWith(t, tt.stdin, 0, tt.args...)
			if r.Err == nil || !strings.Contains(r.Stderr, tt.want) {
				t.Errorf("want an error containing %q; %s", tt.want, r)
			}
		})
	}
	for _, name := range []string{"job/negative", "cronjob/bad"} {
		if !strings.Contains(c.Fails(t, "get", name), "NotFound") {
			t.Errorf("the refused %s was stored", name)
		}
	}

	c.OK(t, "delete", "ds/agent", "sts/db", "controllerrevision/db-1", "job/pi", "cronjob/nightly", "cronjob/hourly")
	// The collector deletes the Job the CronJob owned.
	waitGone(t, c, "get", "jobs", "-o", "name")
}
