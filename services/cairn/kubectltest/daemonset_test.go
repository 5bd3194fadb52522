package kubectltest

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/services/cairn/cairntest"
)

// agentDS is a DaemonSet on every node, rolling one node at a time.
const agentDS = `apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: agent
spec:
  selector:
    matchLabels:
      app: agent
  updateStrategy:
    type: RollingUpdate
    rollingUpdate:
      maxUnavailable: 1
  template:
    metadata:
      labels:
        app: agent
    spec:
      containers:
      - name: agent
        image: busybox:1.36
        command: ["sleep", "3600"]
`

// TestKubectlDaemonSet drives a DaemonSet through the real kubectl against
// a `cairn up` of its own with three hollow nodes (`cairn kubelet --runtime
// hollow`: real kubelets whose containers are simulated), so that the
// default scheduler binds the daemon pods and kubelets report them ready:
// the DaemonSet covers every node (`kubectl rollout status`, `get ds`
// columns), rolls an image update, lists its ControllerRevisions as
// `rollout history`, rolls back with `rollout undo` and restarts with
// `rollout restart`; invalid DaemonSets get 422 with kube's field causes.
func TestKubectlDaemonSet(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cairn and runs cairn up; skipped with -short")
	}
	kubectl := cairntest.KubectlPath(t)
	bin := cairntest.Build(t)
	dir := t.TempDir()
	c := startCluster(t, t, bin, kubectl, filepath.Join(dir, "data"), cairntest.FreeAddr(t), filepath.Join(dir, "home"))
	k := cairntest.NewProc(t, "kubelet", bin, "kubelet", "--data-dir", c.DataDir, "--node-name", "ds",
		"--runtime", "hollow", "--hollow-nodes", "3", "--hollow-start-delay", "100ms")
	k.Start()
	nodes := []string{"ds-0", "ds-1", "ds-2"}
	dsWait(t, c, "three Ready nodes", func() bool {
		k.Alive()
		got := strings.Fields(jsonpath(t, c, `{range .items[*]}{.metadata.name}={.status.conditions[?(@.type=="Ready")].status} {end}`, "nodes"))
		return slices.Equal(got, []string{"ds-0=True", "ds-1=True", "ds-2=True"})
	})

	if got := strings.TrimSpace(c.RunWith(t, agentDS, callTimeout, "apply", "-f", "-").Stdout); got != "daemonset.apps/agent created" {
		t.Fatalf("apply daemonset: %q", got)
	}
	dsRolloutStatus(t, c)
	rows := wantHeader(t, c.OK(t, "get", "ds", "agent"), "NAME", "DESIRED", "CURRENT", "READY", "UP-TO-DATE", "AVAILABLE", "NODE", "SELECTOR", "AGE")
	wantRow(t, rows, "agent", "3", "3", "3", "3", "3", "<none>")
	if got := strings.Fields(jsonpath(t, c, "{.items[*].spec.nodeName}", "pods", "-l", "app=agent")); !slices.Equal(sorted(got), nodes) {
		t.Fatalf("daemon pods on nodes %v, want one on each of %v", got, nodes)
	}

	c.OK(t, "set", "image", "ds/agent", "agent=busybox:1.37")
	dsRolloutStatus(t, c)
	wantImages(t, c, "busybox:1.37")
	if got := dsHistory(t, c); !slices.Equal(got, []string{"1", "2"}) {
		t.Errorf("rollout history revisions %v, want 1 2", got)
	}
	if out := c.OK(t, "rollout", "history", "ds/agent", "--revision=1"); !strings.Contains(out, "busybox:1.36") {
		t.Errorf("rollout history --revision=1 lacks the first image:\n%s", out)
	}

	if got := strings.TrimSpace(c.OK(t, "rollout", "undo", "ds/agent")); got != "daemonset.apps/agent rolled back" {
		t.Errorf("rollout undo: %q", got)
	}
	dsRolloutStatus(t, c)
	wantImages(t, c, "busybox:1.36")
	// The first template's revision is renumbered, not copied.
	if got := dsHistory(t, c); !slices.Equal(got, []string{"2", "3"}) {
		t.Errorf("rollout history after undo %v, want 2 3", got)
	}

	if got := strings.TrimSpace(c.OK(t, "rollout", "restart", "ds/agent")); got != "daemonset.apps/agent restarted" {
		t.Errorf("rollout restart: %q", got)
	}
	dsRolloutStatus(t, c)
	restarted := strings.Fields(jsonpath(t, c, `{range .items[*]}{.metadata.annotations.kubectl\.kubernetes\.io/restartedAt} {end}`, "pods", "-l", "app=agent"))
	if len(restarted) != 3 {
		t.Errorf("%d pods carry restartedAt after rollout restart, want 3", len(restarted))
	}
	if got := dsHistory(t, c); !slices.Equal(got, []string{"2", "3", "4"}) {
		t.Errorf("rollout history after restart %v, want 2 3 4", got)
	}
	if got := jsonpath(t, c, "{.status.observedGeneration} {.metadata.generation} {.status.numberMisscheduled}", "ds", "agent"); got != "4 4 0" {
		t.Errorf("observedGeneration, generation, numberMisscheduled = %q, want 4 4 0", got)
	}
	desc := c.OK(t, "describe", "ds", "agent")
	for _, want := range []string{"Desired Number of Nodes Scheduled: 3", "Number of Nodes Scheduled with Up-to-date Pods: 3", "SuccessfulCreate", "SuccessfulDelete"} {
		if !strings.Contains(desc, want) {
			t.Errorf("describe ds agent lacks %q:\n%s", want, desc)
		}
	}

	for _, tt := range []struct{ name, from, to, want string }{
		{"no limit", "maxUnavailable: 1", "maxUnavailable: 0", "spec.updateStrategy.rollingUpdate.maxUnavailable: Required value: cannot be 0 when maxSurge is 0"},
		{"selector", "app: agent\n  updateStrategy", "app: other\n  updateStrategy", "spec.template.metadata.labels: Invalid value: {\"app\":\"agent\"}: `selector` does not match template `labels`"},
	} {
		bad := strings.Replace(strings.Replace(agentDS, "name: agent\nspec", "name: bad\nspec", 1), tt.from, tt.to, 1)
		r := c.RunWith(t, bad, callTimeout, "apply", "-f", "-")
		if r.Err == nil || !strings.Contains(r.Stderr, tt.want) || !strings.Contains(r.Stderr, "is invalid") {
			t.Errorf("%s: apply an invalid daemonset: %s", tt.name, r)
		}
	}
	if r := c.Run(t, "get", "ds", "bad"); r.Err == nil {
		t.Errorf("an invalid daemonset was stored: %s", r)
	}

	c.OK(t, "delete", "ds", "agent")
	dsWait(t, c, "the daemon pods and revisions collected", func() bool {
		return strings.TrimSpace(c.OK(t, "get", "pods,controllerrevisions", "-l", "app=agent", "-o", "name")) == ""
	})
	k.Stop()
	c.stop(t)
}

// dsRolloutStatus runs `kubectl rollout status ds/agent` and requires that
// it says the rollout finished.
func dsRolloutStatus(t *testing.T, c *cluster) {
	t.Helper()
	r := c.RunWith(t, "", 2*rolloutTimeout, "rollout", "status", "ds/agent", "--timeout="+rolloutTimeout.String())
	if r.Err != nil || !strings.Contains(r.Stdout, `daemon set "agent" successfully rolled out`) {
		t.Fatalf("rollout status ds/agent: %s\n%s", r, c.Run(t, "get", "ds,pods,controllerrevisions", "-o", "wide").Stdout)
	}
}

// dsHistory is the REVISION column of `kubectl rollout history ds/agent`.
func dsHistory(t *testing.T, c *cluster) []string {
	t.Helper()
	var revs []string
	for _, l := range lines(c.OK(t, "rollout", "history", "ds/agent")) {
		if f := strings.Fields(l); len(f) > 0 && f[0] != "REVISION" && !strings.Contains(f[0], "/") {
			revs = append(revs, f[0])
		}
	}
	return revs
}

// wantImages waits until the daemon pods are three, none terminating,
// all running image.
func wantImages(t *testing.T, c *cluster, image string) {
	t.Helper()
	dsWait(t, c, "daemon pods on "+image, func() bool {
		got := strings.Fields(jsonpath(t, c, `{range .items[*]}{.spec.containers[0].image}{.metadata.deletionTimestamp} {end}`, "pods", "-l", "app=agent"))
		return len(got) == 3 && !slices.ContainsFunc(got, func(s string) bool { return s != image })
	})
}

func sorted(s []string) []string { s = slices.Clone(s); slices.Sort(s); return s }

// dsWait polls cond for up to rolloutTimeout and fails with what the
// cluster shows.
func dsWait(t *testing.T, c *cluster, what string, cond func() bool) {
	t.Helper()
	if !waitFor(rolloutTimeout, cond) {
		t.Fatalf("timed out waiting for %s\n%s", what, c.Run(t, "get", "nodes,ds,pods,controllerrevisions", "-o", "wide").Stdout)
	}
}
