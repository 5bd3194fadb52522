package kubectltest

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/services/cairn/cairntest"
)

const deploymentYAML = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels:
    app: web
spec:
  replicas: 1
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
    spec:
      containers:
      - name: nginx
        image: nginx:1.25
        ports:
        - containerPort: 80
`

const podYAML = `apiVersion: v1
kind: Pod
metadata:
  name: box
  labels:
    app: box
    tier: backend
spec:
  containers:
  - name: main
    image: busybox:1.36
    command: ["sleep", "3600"]
`

const unknownFieldYAML = `apiVersion: v1
kind: Pod
metadata:
  name: strict
spec:
  bogusField: 1
  containers:
  - name: main
    image: busybox:1.36
`

const brokenYAML = "apiVersion: v1\nkind: Pod\nmetadata: [\n"

const invalidNameYAML = `apiVersion: v1
kind: Pod
metadata:
  name: Bad_Name
spec:
  containers:
  - name: main
    image: busybox:1.36
`

// manifests are the files the test applies, by name.
type manifests map[string]string

func writeManifests(t *testing.T, dir string) manifests {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	m := manifests{}
	for name, body := range map[string]string{
		"deployment.yaml":    deploymentYAML,
		"deployment-v2.yaml": strings.Replace(deploymentYAML, "nginx:1.25", "nginx:1.26", 1),
		"deployment-v3.yaml": strings.Replace(deploymentYAML, "nginx:1.25", "nginx:1.28", 1),
		"pod.yaml":           podYAML,
		"pod-v2.yaml":        strings.Replace(podYAML, "tier: backend", "tier: frontend", 1),
		"unknown-field.yaml": unknownFieldYAML,
		"broken.yaml":        brokenYAML,
		"invalid-name.yaml":  invalidNameYAML,
	} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		m[name] = p
	}
	return m
}

// TestKubectl drives the real kubectl against a real `cairn up`. The
// subtests share one cluster and run in order: each builds on the objects
// the previous ones left.
func TestKubectl(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cairn and runs cairn up; skipped with -short")
	}
	kubectl := cairntest.KubectlPath(t)
	bin := cairntest.Build(t)
	dir := t.TempDir()
	dataDir := filepath.Join(dir, "data")
	home := filepath.Join(dir, "home")
	addr := cairntest.FreeAddr(t)
	files := writeManifests(t, filepath.Join(dir, "manifests"))
	c := startCluster(t, t, bin, kubectl, dataDir, addr, home)

	t.Run("apply", func(t *testing.T) { testApply(t, c, files) })
	t.Run("dry run and diff", func(t *testing.T) { testDryRun(t, c, files) })
	t.Run("get formats", func(t *testing.T) { testGetFormats(t, c) })
	t.Run("selectors", func(t *testing.T) { testSelectors(t, c) })
	t.Run("patch", func(t *testing.T) { testPatch(t, c) })
	t.Run("scale", func(t *testing.T) { testScale(t, c) })
	t.Run("watch", func(t *testing.T) { testWatch(t, c) })
	t.Run("describe", func(t *testing.T) { testDescribe(t, c) })
	t.Run("create configmap and secret", func(t *testing.T) { testCreate(t, c) })
	t.Run("poddisruptionbudget", func(t *testing.T) { testPodDisruptionBudget(t, c) })
	t.Run("service", func(t *testing.T) { testService(t, c) })
	t.Run("workloads", func(t *testing.T) { testWorkloads(t, c) })
	t.Run("server-side apply", func(t *testing.T) { testServerSideApply(t, c) })
	t.Run("label and annotate", func(t *testing.T) { testLabelAnnotate(t, c) })
	t.Run("explain", func(t *testing.T) { testExplain(t, c) })
	t.Run("api-resources", func(t *testing.T) { testAPIResources(t, c) })
	t.Run("auth", func(t *testing.T) { testAuth(t, c) })
	t.Run("rbac", func(t *testing.T) { testRBAC(t, c) })
	t.Run("serviceaccounts", func(t *testing.T) { testServiceAccounts(t, c) })
	t.Run("webhooks", func(t *testing.T) { testWebhooks(t, c) })
	t.Run("admission policies", func(t *testing.T) { testAdmissionPolicy(t, c) })
	t.Run("errors", func(t *testing.T) { testErrors(t, c, files) })
	owner := t
	t.Run("restart", func(t *testing.T) {
		before := snapshot(t, c)
		c.stop(t)
		c = startCluster(t, owner, bin, kubectl, dataDir, addr, home)
		after := snapshot(t, c)
		for k, v := range before {
			if after[k] != v {
				t.Errorf("after restart %s = %q, want %q", k, after[k], v)
			}
		}
		// Writes work after a restart too.
		c.OK(t, "label", "pod", "box", "restarted=yes")
		if got := c.OK(t, "get", "pods", "-l", "restarted=yes", "-o", "name"); got != "pod/box\n" {
			t.Errorf("get -l restarted=yes = %q", got)
		}
	})
	t.Run("drain", func(t *testing.T) { testDrain(t, c) })
	t.Run("delete", func(t *testing.T) { testDelete(t, c) })
	t.Run("stop", func(t *testing.T) { c.stop(t) })
}

// testDrain drains a node with kubectl drain, which cordons it and evicts
// its pods through pods/eviction (policy/v1 Eviction); without that
// subresource kubectl would fall back to deleting them. A
// PodDisruptionBudget that the disruption controller finds met holds the
// drain back (kubectl retries the 429s until its timeout) until it goes.
func testDrain(t *testing.T, c *cluster) {
	if r := c.RunWith(t, "apiVersion: v1\nkind: Node\nmetadata:\n  name: worker-1\n", 0, "create", "-f", "-"); r.Err != nil {
		t.Fatalf("%s", r)
	}
	c.OK(t, "run", "drained", "--image=busybox:1.36", "--restart=Never", `--overrides={"spec":{"nodeName":"worker-1"}}`)
	// No kubelet runs worker-1: the test reports guarded Running and Ready.
	c.OK(t, "run", "guarded", "--image=busybox:1.36", "--restart=Never", "--labels=app=guarded", `--overrides={"spec":{"nodeName":"worker-1"}}`)
	c.OK(t, "patch", "pod", "guarded", "--subresource=status", "--type=merge",
		"-p", `{"status":{"phase":"Running","conditions":[{"type":"Ready","status":"True"}]}}`)
	if got := strings.TrimSpace(c.OK(t, "create", "poddisruptionbudget", "guarded", "--selector=app=guarded", "--min-available=1")); got != "poddisruptionbudget.policy/guarded created" {
		t.Errorf("kubectl create pdb = %q", got)
	}
	var got string
	if !waitFor(callTimeout, func() bool {
		got = jsonpath(t, c, "{.status.observedGeneration} {.status.currentHealthy} {.status.disruptionsAllowed}", "pdb", "guarded")
		return got == "1 1 0"
	}) {
		t.Fatalf("guarded's budget: observedGeneration, currentHealthy, disruptionsAllowed %q, want the disruption controller to find it met with none to spare (1 1 0)", got)
	}
	if out := c.OK(t, "get", "pdb"); !regexp.MustCompile(`(?m)^guarded\s+1\s+N/A\s+0\s+\d+s$`).MatchString(out) {
		t.Errorf("kubectl get pdb:\n%s", out)
	}
	r := c.RunWith(t, "", 90*time.Second, "drain", "worker-1", "--force", "--grace-period=0", "--timeout=8s")
	if r.Err == nil || !strings.Contains(r.Stderr, `error when evicting pods/"guarded" -n "default" (will retry after 5s): Cannot evict pod as it would violate the pod's disruption budget.`) {
		t.Errorf("kubectl drain with guarded's budget met: want it refused and retried until its timeout; %s", r)
	}
	// It cordoned the node and evicted drained meanwhile.
	held := r.Stdout + r.Stderr
	if got := c.OK(t, "get", "pod", "guarded", "-o", "jsonpath={.metadata.deletionTimestamp}"); got != "" {
		t.Errorf("the budget did not keep guarded: deletionTimestamp %q", got)
	}
	c.OK(t, "delete", "pdb", "guarded")
	r = c.RunWith(t, "", 90*time.Second, "drain", "worker-1", "--force", "--grace-period=0", "--timeout=60s")
	if r.Err != nil {
		t.Fatalf("%s", r)
	}
	out := held + r.Stdout + r.Stderr
	for _, want := range []string{"node/worker-1 cordoned", "evicting pod default/drained", "pod/drained evicted",
		"evicting pod default/guarded", "pod/guarded evicted", "node/worker-1 drained"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl drain does not say %q:\n%s", want, out)
		}
	}
	if got := c.OK(t, "get", "node", "worker-1", "-o", "jsonpath={.spec.unschedulable}"); got != "true" {
		t.Errorf("drained node unschedulable = %q, want true", got)
	}
	for _, pod := range []string{"drained", "guarded"} {
		if r := c.Run(t, "get", "pod", pod); r.Err == nil || !strings.Contains(r.Stderr, "NotFound") {
			t.Errorf("the drained pod %s is still there: %s", pod, r)
		}
	}
	c.OK(t, "delete", "node", "worker-1")
}

func testApply(t *testing.T, c *cluster, files manifests) {
	tests := []struct {
		file  string
		want  string
		after func(t *testing.T) // what the controllers must have done; may be nil
	}{
		{"deployment.yaml", "deployment.apps/web created", func(t *testing.T) { checkFirstRollout(t, c) }},
		{"pod.yaml", "pod/box created", nil},
		{"deployment.yaml", "deployment.apps/web unchanged", nil},
		{"pod.yaml", "pod/box unchanged", nil},
		{"deployment-v2.yaml", "deployment.apps/web configured", nil},
		{"pod-v2.yaml", "pod/box configured", nil},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := strings.TrimSpace(c.OK(t, "apply", "-f", files[tt.file])); got != tt.want {
				t.Errorf("apply -f %s = %q, want %q", tt.file, got, tt.want)
			}
			if tt.after != nil {
				tt.after(t)
			}
		})
	}
	if got := c.OK(t, "get", "deployment", "web", "-o", "jsonpath={.spec.template.spec.containers[0].image}"); got != "nginx:1.26" {
		t.Errorf("deployment image after apply = %q, want nginx:1.26", got)
	}
	if got := c.OK(t, "get", "pod", "box", "-o", "jsonpath={.metadata.labels.tier}"); got != "frontend" {
		t.Errorf("pod tier after apply = %q, want frontend", got)
	}
	// The new template got a second ReplicaSet with one pod; the first
	// keeps its pod, which never becomes ready, so the rollout stays
	// there. The subtests below count on this settled state.
	if r := waitRollout(t, c, 1, "nginx:1.26"); len(r.sets) != 2 || len(r.pods) != 2 {
		t.Errorf("after the new template: %d ReplicaSets and %d pods, want 2 and 2: %+v", len(r.sets), len(r.pods), r)
	}
}

// testDryRun checks that kubectl diff and apply --dry-run=server see the
// change without storing it.
func testDryRun(t *testing.T, c *cluster, files manifests) {
	if out := c.OK(t, "diff", "-f", files["deployment-v2.yaml"]); out != "" {
		t.Errorf("diff against the applied file = %q, want no output", out)
	}
	r := c.Run(t, "diff", "-f", files["deployment-v3.yaml"])
	var exit *exec.ExitError
	if !errors.As(r.Err, &exit) || exit.ExitCode() != 1 {
		t.Errorf("diff of a changed file: want exit code 1; %s", r)
	}
	for _, want := range []string{"-      - image: nginx:1.26\n", "+      - image: nginx:1.28\n"} {
		if !strings.Contains(r.Stdout, want) {
			t.Errorf("diff lacks %q:\n%s", want, r.Stdout)
		}
	}
	if got := strings.TrimSpace(c.OK(t, "apply", "--dry-run=server", "-f", files["deployment-v3.yaml"])); got != "deployment.apps/web configured (server dry run)" {
		t.Errorf("apply --dry-run=server = %q", got)
	}
	if got := c.OK(t, "get", "deployment", "web", "-o", "jsonpath={.spec.template.spec.containers[0].image}"); got != "nginx:1.26" {
		t.Errorf("image after dry runs = %q, want nginx:1.26 (dry runs must not store)", got)
	}
	if got := strings.TrimSpace(c.OK(t, "create", "configmap", "dry-cm", "--from-literal=a=b", "--dry-run=server")); got != "configmap/dry-cm created (server dry run)" {
		t.Errorf("create --dry-run=server = %q", got)
	}
	if r := c.Run(t, "get", "configmap", "dry-cm"); r.Err == nil || !strings.Contains(r.Stderr, "NotFound") {
		t.Errorf("a dry-run create stored its object: %s", r)
	}
	// As against Kubernetes, a dry-run create of a name that is taken fails.
	r = c.Run(t, "create", "--dry-run=server", "-f", files["pod.yaml"])
	if want := `Error from server (AlreadyExists): error when creating "` + files["pod.yaml"] + `": pods "box" already exists`; r.Err == nil || strings.TrimSpace(r.Stderr) != want {
		t.Errorf("create --dry-run=server of an existing pod: want %q; %s", want, r)
	}
}

// lines splits output into non-empty lines.
func lines(s string) []string {
	var out []string
	for l := range strings.SplitSeq(s, "\n") {
		if strings.TrimSpace(l) != "" {
			out = append(out, l)
		}
	}
	return out
}

// table splits kubectl's table output into the header fields and rows of
// fields.
func table(t *testing.T, out string) (header []string, rows [][]string) {
	t.Helper()
	ls := lines(out)
	if len(ls) == 0 {
		t.Fatalf("empty table output")
	}
	for _, l := range ls[1:] {
		rows = append(rows, strings.Fields(l))
	}
	return strings.Fields(ls[0]), rows
}

func wantHeader(t *testing.T, out string, want ...string) [][]string {
	t.Helper()
	header, rows := table(t, out)
	if !slices.Equal(header, want) {
		t.Errorf("header = %q, want %q\n%s", header, want, out)
	}
	return rows
}

func wantRow(t *testing.T, rows [][]string, want ...string) {
	t.Helper()
	for _, r := range rows {
		if len(r) >= len(want) && slices.Equal(r[:len(want)], want) {
			return
		}
	}
	t.Errorf("no row starts with %q in %q", want, rows)
}

// testGetFormats runs with the pod box and the pods the controllers made
// for the web Deployment, which all stay Pending.
func testGetFormats(t *testing.T, c *cluster) {
	web := webPods(t, c)
	var webNames []string
	for _, p := range web {
		webNames = append(webNames, strings.TrimPrefix(p, "pod/"))
	}
	updated := c.OK(t, "get", "deployment", "web", "-o", "jsonpath={.status.updatedReplicas}")
	tests := []struct {
		name  string
		args  []string
		check func(t *testing.T, out string)
	}{
		{"pods table", []string{"get", "pods"}, func(t *testing.T, out string) {
			rows := wantHeader(t, out, "NAME", "READY", "STATUS", "RESTARTS", "AGE")
			wantRow(t, rows, "box", "0/1", "Pending", "0")
		}},
		{"deployments table", []string{"get", "deployments"}, func(t *testing.T, out string) {
			rows := wantHeader(t, out, "NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE")
			// The new ReplicaSet's pod is up to date; none is ready.
			if updated != "1" {
				t.Errorf("status.updatedReplicas = %q, want 1", updated)
			}
			wantRow(t, rows, "web", "0/1", updated, "0")
		}},
		{"pods wide", []string{"get", "pods", "-o", "wide"}, func(t *testing.T, out string) {
			rows := wantHeader(t, out, "NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE", "NOMINATED", "NODE", "READINESS", "GATES")
			wantRow(t, rows, "box", "0/1", "Pending", "0")
		}},
		{"deployments wide", []string{"get", "deployments", "-o", "wide"}, func(t *testing.T, out string) {
			rows := wantHeader(t, out, "NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE", "CONTAINERS", "IMAGES", "SELECTOR")
			if len(rows) != 1 || !slices.Equal(rows[0][len(rows[0])-3:], []string{"nginx", "nginx:1.26", "app=web"}) {
				t.Errorf("rows = %q, want web ... nginx nginx:1.26 app=web", rows)
			}
		}},
		{"show labels", []string{"get", "pods", "--show-labels"}, func(t *testing.T, out string) {
			_, rows := table(t, out)
			if len(rows) != 1+len(web) {
				t.Errorf("rows = %q, want box and %d web pods", rows, len(web))
			}
			for _, r := range rows {
				labels := r[len(r)-1]
				if r[0] == "box" {
					if labels != "app=box,tier=frontend" {
						t.Errorf("box row = %q, want labels app=box,tier=frontend last", r)
					}
					continue
				}
				hash, ok := strings.CutPrefix(labels, "app=web,pod-template-hash=")
				if !ok || !strings.HasPrefix(r[0], "web-"+hash+"-") {
					t.Errorf("row = %q, want a web pod with labels app=web,pod-template-hash=<its hash> last", r)
				}
			}
		}},
		{"all namespaces pods", []string{"get", "pods", "-A"}, func(t *testing.T, out string) {
			rows := wantHeader(t, out, "NAMESPACE", "NAME", "READY", "STATUS", "RESTARTS", "AGE")
			wantRow(t, rows, "default", "box", "0/1", "Pending")
		}},
		{"all namespaces deployments", []string{"get", "deployments", "--all-namespaces"}, func(t *testing.T, out string) {
			rows := wantHeader(t, out, "NAMESPACE", "NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE")
			wantRow(t, rows, "default", "web")
		}},
		{"json", []string{"get", "pod", "box", "-o", "json"}, func(t *testing.T, out string) {
			var pod struct {
				Kind     string `json:"kind"`
				Metadata struct {
					Name, Namespace, ResourceVersion, UID string
					Labels                                map[string]string
				} `json:"metadata"`
				Status struct{ Phase string } `json:"status"`
			}
			if err := json.Unmarshal([]byte(out), &pod); err != nil {
				t.Fatalf("decode -o json: %v\n%s", err, out)
			}
			m := pod.Metadata
			if pod.Kind != "Pod" || m.Name != "box" || m.Namespace != "default" || m.ResourceVersion == "" || m.UID == "" ||
				m.Labels["tier"] != "frontend" || pod.Status.Phase != "Pending" {
				t.Errorf("-o json = %+v", pod)
			}
		}},
		{"json list", []string{"get", "pods", "-o", "json"}, func(t *testing.T, out string) {
			var list struct {
				Kind  string            `json:"kind"`
				Items []json.RawMessage `json:"items"`
			}
			if err := json.Unmarshal([]byte(out), &list); err != nil {
				t.Fatalf("decode -o json: %v\n%s", err, out)
			}
			if list.Kind != "List" || len(list.Items) != 1+len(web) {
				t.Errorf("-o json list: kind %q, %d items", list.Kind, len(list.Items))
			}
		}},
		{"yaml", []string{"get", "deployment", "web", "-o", "yaml"}, func(t *testing.T, out string) {
			for _, want := range []string{"apiVersion: apps/v1\n", "kind: Deployment\n", "  name: web\n", "image: nginx:1.26\n", "  replicas: 1\n"} {
				if !strings.Contains(out, want) {
					t.Errorf("-o yaml lacks %q:\n%s", want, out)
				}
			}
		}},
		{"name pods", []string{"get", "pods", "-o", "name"}, wantExactly("pod/box\n" + strings.Join(web, "\n") + "\n")},
		{"name deployments", []string{"get", "deployments", "-o", "name"}, wantExactly("deployment.apps/web\n")},
		{"jsonpath", []string{"get", "pod", "box", "-o", "jsonpath={.spec.containers[0].image}"}, wantExactly("busybox:1.36")},
		{"jsonpath list", []string{"get", "pods", "-o", "jsonpath={.items[*].metadata.name}"}, wantExactly(strings.Join(append([]string{"box"}, webNames...), " "))},
		{"custom-columns", []string{"get", "pods", "-o", "custom-columns=NAME:.metadata.name,IMAGE:.spec.containers[0].image,PHASE:.status.phase"}, func(t *testing.T, out string) {
			rows := wantHeader(t, out, "NAME", "IMAGE", "PHASE")
			wantRow(t, rows, "box", "busybox:1.36", "Pending")
		}},
		{"go-template", []string{"get", "pods", "-o", `go-template={{range .items}}{{.metadata.name}}={{.status.phase}}{{"\n"}}{{end}}`},
			wantExactly("box=Pending\n" + strings.Join(webNames, "=Pending\n") + "=Pending\n")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.check(t, c.OK(t, tt.args...))
		})
	}
}

func wantExactly(want string) func(t *testing.T, out string) {
	return func(t *testing.T, out string) {
		t.Helper()
		if out != want {
			t.Errorf("output = %q, want %q", out, want)
		}
	}
}

// testSelectors runs with the pod box and the web Deployment's pods, which
// have labels app=web and pod-template-hash but no tier, and are Pending.
// In want, {web} stands for the web pods, one a line.
func testSelectors(t *testing.T, c *cluster) {
	web := strings.Join(webPods(t, c), "\n") + "\n"
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"label equals", []string{"pods", "-l", "app=box"}, "pod/box\n"},
		{"label no match", []string{"pods", "-l", "app=nope"}, ""},
		{"label set", []string{"pods", "-l", "tier in (frontend,backend)"}, "pod/box\n"},
		{"label not exists", []string{"pods", "-l", "!tier"}, "{web}"},
		{"label not exists box", []string{"pods", "-l", "!pod-template-hash"}, "pod/box\n"},
		{"label not exists no match", []string{"pods", "-l", "app=box,!tier"}, ""},
		{"label two requirements", []string{"pods", "-l", "app=box,tier!=backend"}, "pod/box\n"},
		{"deployment label", []string{"deployments", "-l", "app=web"}, "deployment.apps/web\n"},
		{"field name", []string{"pods", "--field-selector", "metadata.name=box"}, "pod/box\n"},
		{"field name no match", []string{"pods", "--field-selector", "metadata.name=other"}, ""},
		{"field phase", []string{"pods", "--field-selector", "status.phase=Pending"}, "pod/box\n{web}"},
		{"field phase no match", []string{"pods", "--field-selector", "status.phase=Running"}, ""},
		{"field phase not", []string{"pods", "--field-selector", "status.phase!=Pending"}, ""},
		{"field and label", []string{"pods", "--field-selector", "metadata.name=box", "-l", "app=box"}, "pod/box\n"},
		{"all namespaces label", []string{"pods", "-A", "-l", "app=box"}, "pod/box\n"},
		{"all namespaces field", []string{"pods", "-A", "--field-selector", "metadata.namespace=default"}, "pod/box\n{web}"},
		{"all namespaces field name", []string{"pods", "-A", "--field-selector", "metadata.namespace=default,metadata.name=box"}, "pod/box\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"get"}, tt.args...)
			args = append(args, "-o", "name")
			want := strings.ReplaceAll(tt.want, "{web}", web)
			if got := c.OK(t, args...); got != want {
				t.Errorf("kubectl %s = %q, want %q", strings.Join(args, " "), got, want)
			}
		})
	}
}

func testPatch(t *testing.T, c *cluster) {
	tests := []struct {
		name     string
		args     []string
		wantOut  string
		jsonpath string
		want     string
	}{
		{"json add label", []string{"pod", "box", "--type", "json", "-p", `[{"op":"add","path":"/metadata/labels/patched","value":"json"}]`},
			"pod/box patched", "pod box {.metadata.labels.patched}", "json"},
		{"json replace replicas", []string{"deployment", "web", "--type", "json", "-p", `[{"op":"replace","path":"/spec/replicas","value":2}]`},
			"deployment.apps/web patched", "deployment web {.spec.replicas}", "2"},
		{"merge add annotation", []string{"pod", "box", "--type", "merge", "-p", `{"metadata":{"annotations":{"merged":"yes"}}}`},
			"pod/box patched", "pod box {.metadata.annotations.merged}", "yes"},
		{"merge null removes", []string{"pod", "box", "--type", "merge", "-p", `{"metadata":{"labels":{"patched":null}}}`},
			"pod/box patched", "pod box {.metadata.labels}", `{"app":"box","tier":"frontend"}`},
		// A strategic merge patch merges containers by name: the sidecar
		// joins nginx instead of replacing the list.
		{"strategic add container", []string{"deployment", "web", "--type", "strategic", "-p", `{"spec":{"template":{"spec":{"containers":[{"name":"sidecar","image":"busybox:1.36"}]}}}}`},
			"deployment.apps/web patched", "deployment web {.spec.template.spec.containers[?(@.name==\"nginx\")].image} {.spec.template.spec.containers[?(@.name==\"sidecar\")].image}", "nginx:1.26 busybox:1.36"},
		{"strategic update container", []string{"deployment", "web", "-p", `{"spec":{"template":{"spec":{"containers":[{"name":"nginx","image":"nginx:1.27"}]}}}}`},
			"deployment.apps/web patched", "deployment web {.spec.template.spec.containers[?(@.name==\"nginx\")].image} {.spec.template.spec.containers[?(@.name==\"sidecar\")].image}", "nginx:1.27 busybox:1.36"},
		{"strategic delete container", []string{"deployment", "web", "--type", "strategic", "-p", `{"spec":{"template":{"spec":{"containers":[{"name":"sidecar","$patch":"delete"}]}}}}`},
			"deployment.apps/web patched", "deployment web {.spec.template.spec.containers[*].name}", "nginx"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"patch"}, tt.args...)
			if got := strings.TrimSpace(c.OK(t, args...)); got != tt.wantOut {
				t.Errorf("kubectl %s = %q, want %q", strings.Join(args, " "), got, tt.wantOut)
			}
			f := strings.SplitN(tt.jsonpath, " ", 3)
			if got := c.OK(t, "get", f[0], f[1], "-o", "jsonpath="+f[2]); got != tt.want {
				t.Errorf("after patch %s = %q, want %q", f[2], got, tt.want)
			}
		})
	}
}

func testScale(t *testing.T, c *cluster) {
	if got := strings.TrimSpace(c.OK(t, "scale", "deployment", "web", "--replicas=3")); got != "deployment.apps/web scaled" {
		t.Errorf("scale = %q", got)
	}
	if got := c.OK(t, "get", "deployment", "web", "-o", "jsonpath={.spec.replicas}"); got != "3" {
		t.Errorf("spec.replicas = %q, want 3", got)
	}
	// The patches left a rolling update that cannot finish (no pod ever
	// becomes ready), so the controllers scale it proportionally: 3 to 4
	// Pending pods over the ReplicaSets, the newest one with nginx:1.27.
	r := waitRollout(t, c, 3, "nginx:1.27")
	if got := c.OK(t, "get", "deployment", "web", "-o", "jsonpath={.status.replicas} {.status.updatedReplicas}"); got != fmt.Sprintf("%d %d", len(r.pods), r.newest().replicas) {
		t.Errorf("deployment status replicas, updatedReplicas = %q, want %d %d", got, len(r.pods), r.newest().replicas)
	}
	// --current-replicas is a precondition checked against the scale
	// subresource.
	c.Fails(t, "scale", "deployment", "web", "--current-replicas=5", "--replicas=4")
	if got := c.OK(t, "get", "deployment", "web", "-o", "jsonpath={.spec.replicas}"); got != "3" {
		t.Errorf("spec.replicas after failed precondition = %q, want 3", got)
	}
}

func countPrefix(out, prefix string) int {
	n := 0
	for _, l := range lines(out) {
		if strings.HasPrefix(l, prefix) {
			n++
		}
	}
	return n
}

func testWatch(t *testing.T, c *cluster) {
	t.Run("table", func(t *testing.T) {
		out, stop := c.Background(t, "get", "pods", "-w")
		defer stop()
		if !waitFor(10*time.Second, func() bool { return countPrefix(out.String(), "box ") >= 1 }) {
			t.Fatalf("get pods -w printed no initial row in 10s:\n%s", out)
		}
		if h := lines(out.String())[0]; !slices.Equal(strings.Fields(h), []string{"NAME", "READY", "STATUS", "RESTARTS", "AGE"}) {
			t.Errorf("get pods -w header = %q", h)
		}
		c.OK(t, "label", "pod", "box", "watched=table")
		if !waitFor(10*time.Second, func() bool { return countPrefix(out.String(), "box ") >= 2 }) {
			t.Errorf("get pods -w did not show the label change within 10s:\n%s", out)
		}
	})
	t.Run("watch-only", func(t *testing.T) {
		out, stop := c.Background(t, "get", "pods", "--watch-only", "-o", "custom-columns=NAME:.metadata.name,W:.metadata.labels.watched", "--no-headers")
		defer stop()
		// --watch-only prints only changes, so there is no line telling
		// when the watch is open: change the pod until a change shows.
		seen := func() bool { return strings.Contains(out.String(), "only") }
		deadline := time.Now().Add(10 * time.Second)
		for !seen() && time.Now().Before(deadline) {
			c.OK(t, "label", "pod", "box", "watched=only", "--overwrite")
			waitFor(time.Second, seen)
			c.OK(t, "label", "pod", "box", "watched-")
		}
		if !seen() {
			t.Errorf("get pods --watch-only did not show a label change within 10s:\n%s", out)
		}
	})
}

const eventYAML = `apiVersion: v1
kind: Event
metadata:
  name: box.kubectltest
involvedObject:
  apiVersion: v1
  kind: Pod
  name: box
  namespace: default
  uid: UID
reason: Probed
message: hello from kubectltest
type: Normal
source:
  component: kubectltest
count: 1
`

func testDescribe(t *testing.T, c *cluster) {
	// describe lists the events whose involvedObject is the pod, by uid.
	uid := c.OK(t, "get", "pod", "box", "-o", "jsonpath={.metadata.uid}")
	ev := filepath.Join(t.TempDir(), "event.yaml")
	if err := os.WriteFile(ev, []byte(strings.Replace(eventYAML, "UID", uid, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	c.OK(t, "create", "-f", ev)
	rows := wantHeader(t, c.OK(t, "get", "events", "--field-selector", "reason=Probed"), "LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE")
	if len(rows) != 1 || !slices.Equal(rows[0][1:], strings.Fields("Normal Probed pod/box hello from kubectltest")) {
		t.Errorf("get events rows = %q", rows)
	}
	// This cluster has no node: the scheduler says so, as kube's does.
	rows = wantHeader(t, c.OK(t, "get", "events", "--field-selector", "involvedObject.name=box,reason=FailedScheduling"),
		"LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE")
	if len(rows) != 1 || !slices.Equal(rows[0][1:], strings.Fields("Warning FailedScheduling pod/box no nodes available to schedule pods")) {
		t.Errorf("FailedScheduling events of box = %q", rows)
	}
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"pod", "box"}, []string{`(?m)^Name:\s+box$`, `(?m)^Namespace:\s+default$`, `(?m)^Labels:\s+app=box$`, `(?m)^\s+tier=frontend$`,
			`(?m)^Status:\s+Pending$`, `(?m)^\s+Image:\s+busybox:1.36$`, `(?m)^Events:\n\s+Type\s+Reason\s+Age\s+From\s+Message$`,
			`(?m)^\s+Normal\s+Probed\s+\S+\s+kubectltest\s+hello from kubectltest$`}},
		{[]string{"deployment", "web"}, []string{`(?m)^Name:\s+web$`, `(?m)^Namespace:\s+default$`, `(?m)^Labels:\s+app=web$`,
			`(?m)^Selector:\s+app=web$`, `(?m)^Replicas:\s+3 desired \| \d+ updated \| \d+ total \| 0 available \| \d+ unavailable$`,
			`(?m)^StrategyType:\s+RollingUpdate$`, `(?m)^OldReplicaSets:\s+web-[a-z0-9]+ \(\d+/\d+ replicas created\)`,
			`(?m)^NewReplicaSet:\s+web-[a-z0-9]+ \(\d+/\d+ replicas created\)$`,
			// The deployment controller's Events, as kube's.
			`(?m)^Events:\n\s+Type\s+Reason\s+Age\s+From\s+Message$`,
			`(?m)^\s+Normal\s+ScalingReplicaSet\s+\S+\s+deployment-controller\s+Scaled up replica set web-[a-z0-9]+ from 0 to \d+$`}},
	}
	for _, tt := range tests {
		t.Run(tt.args[0], func(t *testing.T) {
			// Events are written asynchronously: look again for a while.
			var out string
			var missing []string
			for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(200 * time.Millisecond) {
				out, missing = c.OK(t, append([]string{"describe"}, tt.args...)...), nil
				for _, re := range tt.want {
					if !regexp.MustCompile(re).MatchString(out) {
						missing = append(missing, re)
					}
				}
				if len(missing) == 0 || time.Now().After(deadline) {
					break
				}
			}
			for _, re := range missing {
				t.Errorf("describe %s does not match %s:\n%s", tt.args[0], re, out)
			}
		})
	}
}

func testCreate(t *testing.T, c *cluster) {
	if got := strings.TrimSpace(c.OK(t, "create", "configmap", "cfg", "--from-literal=a=1", "--from-literal=b=2")); got != "configmap/cfg created" {
		t.Errorf("create configmap = %q", got)
	}
	if got := strings.TrimSpace(c.OK(t, "create", "secret", "generic", "sec", "--from-literal=password=hunter2")); got != "secret/sec created" {
		t.Errorf("create secret = %q", got)
	}
	rows := wantHeader(t, c.OK(t, "get", "configmap", "cfg"), "NAME", "DATA", "AGE")
	wantRow(t, rows, "cfg", "2")
	rows = wantHeader(t, c.OK(t, "get", "secret", "sec"), "NAME", "TYPE", "DATA", "AGE")
	wantRow(t, rows, "sec", "Opaque", "1")
	if got := c.OK(t, "get", "cm", "cfg", "-o", "jsonpath={.data.a},{.data.b}"); got != "1,2" {
		t.Errorf("configmap data = %q, want 1,2", got)
	}
	enc := c.OK(t, "get", "secret", "sec", "-o", "jsonpath={.data.password}")
	if dec, err := base64.StdEncoding.DecodeString(enc); err != nil || string(dec) != "hunter2" {
		t.Errorf("secret data.password = %q (%v), want base64 of hunter2", enc, err)
	}
	// Pages of one item each: the table and the names come out whole
	// (with kube-root-ca.crt, which every namespace has).
	for _, n := range []string{"page-1", "page-2", "page-3"} {
		c.OK(t, "create", "configmap", n)
	}
	rows = wantHeader(t, c.OK(t, "get", "cm", "--chunk-size=1"), "NAME", "DATA", "AGE")
	if len(rows) != 5 {
		t.Errorf("get cm --chunk-size=1: %d rows, want 5: %q", len(rows), rows)
	}
	if got := c.OK(t, "get", "cm", "--chunk-size=1", "-o", "name"); got != "configmap/cfg\nconfigmap/kube-root-ca.crt\nconfigmap/page-1\nconfigmap/page-2\nconfigmap/page-3\n" {
		t.Errorf("get cm --chunk-size=1 -o name = %q", got)
	}
	c.OK(t, "delete", "configmap", "page-1", "page-2", "page-3")
	stderr := c.Fails(t, "create", "configmap", "cfg")
	if !strings.Contains(stderr, `configmaps "cfg" already exists`) {
		t.Errorf("create existing configmap: stderr = %q", stderr)
	}
}

func testLabelAnnotate(t *testing.T, c *cluster) {
	steps := []struct {
		args    []string
		wantOut string // empty: the call must fail
		wantErr string
	}{
		{[]string{"label", "cm", "cfg", "env=test"}, "configmap/cfg labeled", ""},
		{[]string{"annotate", "cm", "cfg", "note=hello"}, "configmap/cfg annotated", ""},
		{[]string{"label", "cm", "cfg", "env=prod"}, "", "'env' already has a value (test), and --overwrite is false"},
		{[]string{"annotate", "cm", "cfg", "note=bye"}, "", "'note' already has a value (hello)"},
		{[]string{"label", "cm", "cfg", "env=prod", "--overwrite"}, "configmap/cfg labeled", ""},
		{[]string{"annotate", "cm", "cfg", "note=bye", "--overwrite"}, "configmap/cfg annotated", ""},
		{[]string{"label", "cm", "cfg", "gone=soon"}, "configmap/cfg labeled", ""},
		{[]string{"label", "cm", "cfg", "gone-"}, "configmap/cfg unlabeled", ""},
		{[]string{"label", "pod", "box", "checked=yes"}, "pod/box labeled", ""},
	}
	for _, s := range steps {
		if s.wantOut == "" {
			if stderr := c.Fails(t, s.args...); !strings.Contains(stderr, s.wantErr) {
				t.Errorf("kubectl %s: stderr = %q, want %q", strings.Join(s.args, " "), stderr, s.wantErr)
			}
			continue
		}
		if got := strings.TrimSpace(c.OK(t, s.args...)); got != s.wantOut {
			t.Errorf("kubectl %s = %q, want %q", strings.Join(s.args, " "), got, s.wantOut)
		}
	}
	if got := c.OK(t, "get", "cm", "cfg", "-o", "jsonpath={.metadata.labels} {.metadata.annotations}"); got != `{"env":"prod"} {"note":"bye"}` {
		t.Errorf("configmap labels and annotations = %q", got)
	}
	if got := c.OK(t, "get", "cm", "-l", "env=prod", "-o", "name"); got != "configmap/cfg\n" {
		t.Errorf("get cm -l env=prod = %q", got)
	}
	if got := c.OK(t, "get", "pods", "-l", "checked=yes", "-o", "name"); got != "pod/box\n" {
		t.Errorf("get pods -l checked=yes = %q", got)
	}
}

func testExplain(t *testing.T, c *cluster) {
	tests := []struct {
		path string
		want []string
	}{
		{"pods.spec.containers", []string{"KIND:       Pod", "FIELD: containers <[]Container>", "DESCRIPTION:", "FIELDS:", "  image\t<string>", "  name\t<string> -required-"}},
		{"deployment.spec.strategy", []string{"KIND:       Deployment", "GROUP:      apps", "FIELD: strategy <DeploymentStrategy>", "  rollingUpdate\t<RollingUpdateDeployment>", "  type\t<string>"}},
		{"svc.spec", []string{"KIND:       Service", "FIELD: spec <ServiceSpec>", "  clusterIP\t<string>", "  ports\t<[]ServicePort>", "  selector\t<map[string]string>", "  type\t<string>"}},
		{"job.spec", []string{"KIND:       Job", "GROUP:      batch", "FIELD: spec <JobSpec>", "  backoffLimit\t<integer>", "  completionMode\t<string>", "  template\t<PodTemplateSpec> -required-"}},
		{"cronjob.spec.schedule", []string{"KIND:       CronJob", "GROUP:      batch", "FIELD: schedule <string>"}},
		{"sts.spec.updateStrategy", []string{"KIND:       StatefulSet", "GROUP:      apps", "  rollingUpdate\t<RollingUpdateStatefulSetStrategy>"}},
		{"ds.spec.updateStrategy.rollingUpdate", []string{"KIND:       DaemonSet", "  maxSurge\t<IntOrString>", "  maxUnavailable\t<IntOrString>"}},
		{"pdb.spec", []string{"KIND:       PodDisruptionBudget", "GROUP:      policy", "FIELD: spec <PodDisruptionBudgetSpec>", "  maxUnavailable\t<IntOrString>", "  selector\t<LabelSelector>", "  unhealthyPodEvictionPolicy\t<string>"}},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			out := c.OK(t, "explain", tt.path)
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("explain %s lacks %q:\n%s", tt.path, w, out)
				}
			}
		})
	}
	t.Run("unknown field", func(t *testing.T) {
		if stderr := c.Fails(t, "explain", "pods.spec.bogus"); !strings.Contains(stderr, `field "bogus" does not exist`) {
			t.Errorf("explain pods.spec.bogus: stderr = %q", stderr)
		}
	})
}

// testAuth asks who the kubeconfig's user is and what it may do, through
// the self reviews.
func testAuth(t *testing.T, c *cluster) {
	if got := strings.TrimSpace(c.OK(t, "auth", "can-i", "delete", "deployments")); got != "yes" {
		t.Errorf("auth can-i delete deployments = %q, want yes", got)
	}
	if got := c.OK(t, "auth", "whoami", "-o", "jsonpath={.status.userInfo.username} {.status.userInfo.groups}"); got != `cairn-admin ["system:masters","system:authenticated"]` {
		t.Errorf("auth whoami = %q", got)
	}
	// The admin's rules include everything on every resource and path.
	out := c.OK(t, "auth", "can-i", "--list")
	header, rows := table(t, out)
	if !slices.Equal(header, []string{"Resources", "Non-Resource", "URLs", "Resource", "Names", "Verbs"}) ||
		!slices.ContainsFunc(rows, func(r []string) bool { return slices.Equal(r, []string{"*.*", "[]", "[]", "[*]"}) }) ||
		!slices.ContainsFunc(rows, func(r []string) bool { return slices.Equal(r, []string{"[*]", "[]", "[*]"}) }) {
		t.Errorf("auth can-i --list:\n%s", out)
	}
}

func testAPIResources(t *testing.T, c *cluster) {
	out := c.OK(t, "api-resources")
	header, rows := table(t, out)
	if !slices.Equal(header, []string{"NAME", "SHORTNAMES", "APIVERSION", "NAMESPACED", "KIND"}) {
		t.Errorf("api-resources header = %q", header)
	}
	want := [][]string{
		{"pods", "po", "v1", "true", "Pod"},
		{"configmaps", "cm", "v1", "true", "ConfigMap"},
		{"secrets", "v1", "true", "Secret"},
		{"namespaces", "ns", "v1", "false", "Namespace"},
		{"deployments", "deploy", "apps/v1", "true", "Deployment"},
		{"poddisruptionbudgets", "pdb", "policy/v1", "true", "PodDisruptionBudget"},
		{"services", "svc", "v1", "true", "Service"},
		{"endpoints", "ep", "v1", "true", "Endpoints"},
		{"endpointslices", "discovery.k8s.io/v1", "true", "EndpointSlice"},
		{"controllerrevisions", "apps/v1", "true", "ControllerRevision"},
		{"daemonsets", "ds", "apps/v1", "true", "DaemonSet"},
		{"statefulsets", "sts", "apps/v1", "true", "StatefulSet"},
		{"jobs", "batch/v1", "true", "Job"},
		{"cronjobs", "cj", "batch/v1", "true", "CronJob"},
		{"selfsubjectaccessreviews", "authorization.k8s.io/v1", "false", "SelfSubjectAccessReview"},
	}
	for _, w := range want {
		if !slices.ContainsFunc(rows, func(r []string) bool { return slices.Equal(r, w) }) {
			t.Errorf("api-resources lacks row %q:\n%s", w, out)
		}
	}
	versions := lines(c.OK(t, "api-versions"))
	for _, v := range []string{"v1", "apps/v1", "batch/v1", "policy/v1", "discovery.k8s.io/v1"} {
		if !slices.Contains(versions, v) {
			t.Errorf("api-versions = %q, lacks %s", versions, v)
		}
	}
}

func testErrors(t *testing.T, c *cluster, files manifests) {
	// kube's message for a forbidden pod update carries a diff.
	multiline := map[string]bool{"immutable field": true}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"unknown field", []string{"apply", "-f", files["unknown-field.yaml"]}, `strict decoding error: unknown field "spec.bogusField"`},
		{"unknown field create", []string{"create", "-f", files["unknown-field.yaml"]}, `Error from server (BadRequest): error when creating`},
		{"broken yaml", []string{"apply", "-f", files["broken.yaml"]}, "error converting YAML to JSON"},
		{"invalid name", []string{"apply", "-f", files["invalid-name.yaml"]}, `The Pod "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name"`},
		{"unknown resource type", []string{"get", "frobs"}, `the server doesn't have a resource type "frobs"`},
		{"bad field selector", []string{"get", "pods", "--field-selector", "spec.bogus=1"}, "field label not supported: spec.bogus"},
		{"bad label selector", []string{"get", "pods", "-l", "a in ("}, "unable to parse requirement"},
		{"invalid replicas", []string{"patch", "deployment", "web", "--type", "merge", "-p", `{"spec":{"replicas":-1}}`},
			`The Deployment "web" is invalid: spec.replicas: Invalid value: -1: must be greater than or equal to 0`},
		{"merge patch not json", []string{"patch", "pod", "box", "--type", "merge", "-p", `{bad`}, "Error from server (BadRequest)"},
		{"json patch test fails", []string{"patch", "pod", "box", "--type", "json", "-p", `[{"op":"test","path":"/metadata/name","value":"x"}]`},
			`The Pod "box" is invalid: patch: Invalid value: `},
		{"json patch missing path", []string{"patch", "pod", "box", "--type", "json", "-p", `[{"op":"replace","path":"/spec/nope/x","value":"x"}]`},
			`The Pod "box" is invalid: patch: Invalid value: `},
		{"immutable field", []string{"patch", "pod", "box", "--type", "json", "-p", `[{"op":"replace","path":"/spec/containers/0/name","value":"other"}]`},
			`The Pod "box" is invalid: spec: Forbidden: pod updates may not change fields other than`},
		{"not found", []string{"get", "pod", "nope"}, `Error from server (NotFound): pods "nope" not found`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stderr := strings.TrimSpace(c.Fails(t, tt.args...))
			if !strings.Contains(stderr, tt.want) {
				t.Errorf("kubectl %s: stderr = %q, want it to contain %q", strings.Join(tt.args, " "), stderr, tt.want)
			}
			if !multiline[tt.name] && strings.Contains(stderr, "\n") {
				t.Errorf("kubectl %s: error is not one line: %q", strings.Join(tt.args, " "), stderr)
			}
			if n := strings.Count(stderr, "unable to parse requirement"); n > 1 {
				t.Errorf("kubectl %s: repeated prefix in %q", strings.Join(tt.args, " "), stderr)
			}
		})
	}
	// The strict decoding error rejected the object: nothing was stored.
	if stderr := c.Fails(t, "get", "pod", "strict"); !strings.Contains(stderr, "(NotFound)") {
		t.Errorf("get pod strict: stderr = %q", stderr)
	}
}

// snapshot records what must survive a restart: each object's
// resourceVersion and a few fields.
func snapshot(t *testing.T, c *cluster) map[string]string {
	t.Helper()
	s := map[string]string{}
	for _, q := range []struct{ key, kind, name, path string }{
		{"pod", "pod", "box", "{.metadata.resourceVersion} {.metadata.uid} {.spec.containers[0].image}"},
		{"deployment", "deployment", "web", "{.metadata.resourceVersion} {.spec.replicas} {.spec.template.spec.containers[0].image}"},
		{"configmap", "configmap", "cfg", "{.metadata.resourceVersion} {.data}"},
		{"secret", "secret", "sec", "{.metadata.resourceVersion} {.data}"},
	} {
		s[q.key] = c.OK(t, "get", q.kind, q.name, "-o", "jsonpath="+q.path)
	}
	s["pods"] = c.OK(t, "get", "pods", "-A", "-o", "name")
	return s
}

func testDelete(t *testing.T, c *cluster) {
	tests := []struct {
		kind, name string
		wantOut    string
		wantErr    string
	}{
		{"pod", "box", `pod "box" deleted`, `Error from server (NotFound): pods "box" not found`},
		{"deployment", "web", `deployment.apps "web" deleted`, `Error from server (NotFound): deployments.apps "web" not found`},
		{"configmap", "cfg", `configmap "cfg" deleted`, `Error from server (NotFound): configmaps "cfg" not found`},
		{"secret", "sec", `secret "sec" deleted`, `Error from server (NotFound): secrets "sec" not found`},
	}
	for _, tt := range tests {
		t.Run(tt.kind, func(t *testing.T) {
			if got := strings.TrimSpace(c.OK(t, "delete", tt.kind, tt.name)); got != tt.wantOut {
				t.Errorf("delete %s %s = %q, want %q", tt.kind, tt.name, got, tt.wantOut)
			}
			if stderr := strings.TrimSpace(c.Fails(t, "get", tt.kind, tt.name)); stderr != tt.wantErr {
				t.Errorf("get after delete: stderr = %q, want %q", stderr, tt.wantErr)
			}
			if stderr := strings.TrimSpace(c.Fails(t, "delete", tt.kind, tt.name)); stderr != tt.wantErr {
				t.Errorf("second delete: stderr = %q, want %q", stderr, tt.wantErr)
			}
		})
	}
	// The garbage collector deletes the Deployment's ReplicaSets and then
	// their pods.
	waitGone(t, c, "get", "rs", "-A", "-o", "name")
	waitGone(t, c, "get", "pods", "-A", "-o", "name")
}
