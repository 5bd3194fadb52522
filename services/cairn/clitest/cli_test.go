package clitest

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/services/cairn/cairntest"
	"github.com/cairn-dev/cairn/services/embedded/endpoints"
)

const (
	upTimeout   = 90 * time.Second  // cairn up to serve the history
	waitTimeout = 120 * time.Second // the history or a node to catch up
	callTimeout = 60 * time.Second  // one cairn command
	stopTimeout = 30 * time.Second  // cairn up to end after a signal
)

// TestMain checks that no test leaves a goroutine behind.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// cluster is a running `cairn up --node=false` and what the test made in it.
type cluster struct {
	bin, dir string
	up       *cairntest.Up
	cs       kubernetes.Interface
	// created and scaled are the revisions at which the Deployment web was
	// created (1 replica) and scaled to 2.
	created, scaled string
	// elsewhere is the working directory of the commands: no .cairn in it.
	elsewhere string
}

// TestCLI runs the cairn commands from outside the data directory; see
// doc.go.
func TestCLI(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cairn and runs cairn up; skipped with -short")
	}
	c := start(t)
	t.Run("commands find the cluster", c.testFind)
	t.Run("events verify", c.testVerify)
	t.Run("one-line errors", c.testErrors)
	t.Run("kubelet joins with credentials from the PKI", c.testKubelet)
	t.Run("proxy runs alone in a node's namespace", c.testProxy)
}

// start runs cairn up, waits until the history serves, and writes the
// Deployment the commands look at.
func start(t *testing.T) *cluster {
	c := &cluster{bin: cairntest.Build(t), dir: filepath.Join(t.TempDir(), "data"), elsewhere: t.TempDir()}
	c.up = cairntest.StartUp(t, t, cairntest.UpConfig{Bin: c.bin, DataDir: c.dir, Addr: cairntest.FreeAddr(t),
		Args: []string{"--node=false"}, StopTimeout: stopTimeout})
	c.up.WaitReady(t, upTimeout, func() error {
		// endpoints.json is written once the control plane is ready.
		if _, err := os.Stat(endpoints.Path(c.dir)); err != nil {
			return err
		}
		rc, err := clientcmd.BuildConfigFromFlags("", c.up.Kubeconfig())
		if err != nil {
			return err
		}
		cs, err := kubernetes.NewForConfig(rc)
		if err != nil {
			return err
		}
		c.cs = cs
		_, err = cs.Discovery().RESTClient().Get().AbsPath("/history/api/audit").Param("limit", "1").DoRaw(t.Context())
		return err
	})
	one := int32(1)
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: appsv1.DeploymentSpec{Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "busybox:1"}}}}},
	}
	created, err := c.cs.AppsV1().Deployments("default").Create(t.Context(), d, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	scaled, err := c.cs.AppsV1().Deployments("default").Patch(t.Context(), "web", types.MergePatchType,
		[]byte(`{"spec":{"replicas":2}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c.created, c.scaled = created.ResourceVersion, scaled.ResourceVersion
	// The history has caught up once it can tell the two apart.
	c.eventually(t, "the history to hold the scale-up", func() error {
		r := c.run(t, c.kubeconfigEnv(), "diff", "deployment/web", "--from", c.created, "--to", c.scaled)
		if r.Err == nil && !strings.Contains(r.Stdout, "spec.replicas") {
			return errors.New("no spec.replicas in the diff yet")
		}
		return resultErr(r)
	})
	return c
}

// run runs the cairn binary in c.elsewhere with env.
func (c *cluster) run(t *testing.T, env []string, args ...string) cairntest.Result {
	t.Helper()
	return cairntest.RunIn(t, callTimeout, c.elsewhere, env, c.bin, args...)
}

// kubeconfigEnv is the environment of a user who exported cairn up's
// KUBECONFIG, as the README says.
func (c *cluster) kubeconfigEnv() []string { return []string{"KUBECONFIG=" + c.up.Kubeconfig()} }

// eventually polls f until it returns nil, failing t after waitTimeout.
func (c *cluster) eventually(t *testing.T, what string, f func() error) {
	t.Helper()
	for deadline := time.Now().Add(waitTimeout); ; time.Sleep(500 * time.Millisecond) {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: %v", what, err)
		}
	}
}

func resultErr(r cairntest.Result) error {
	if r.Err != nil {
		return errors.New(r.String())
	}
	return nil
}

// testFind runs each command from a directory without .cairn, the cluster
// named by KUBECONFIG (a file, or a list client-go merges), --kubeconfig or
// --data-dir.
func (c *cluster) testFind(t *testing.T) {
	kc := c.up.Kubeconfig()
	// A list: a missing file (skipped, as kubectl skips it), then a file
	// that only picks the context, then cairn up's kubeconfig with the
	// cluster, so that the endpoints are found next to the file that
	// defines the current context's cluster, not the first of the list.
	picker := filepath.Join(t.TempDir(), "picker")
	if err := os.WriteFile(picker, []byte("apiVersion: v1\nkind: Config\ncurrent-context: cairn\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	merged := []string{"KUBECONFIG=" + strings.Join([]string{filepath.Join(t.TempDir(), "missing"), picker, kc}, string(filepath.ListSeparator))}
	// A KUBECONFIG of another cluster loses to the flags.
	other := []string{"KUBECONFIG=" + filepath.Join(t.TempDir(), "other-cluster")}
	noEnv := []string{"KUBECONFIG="}

	timeline := []string{"Deployment default/web", "REV", "cairn-admin"}
	tests := []struct {
		name string
		env  []string
		args []string
		want []string
	}{
		{"timeline", c.kubeconfigEnv(), []string{"timeline", "deployment/web"}, timeline},
		{"audit", c.kubeconfigEnv(), []string{"audit", "--kind", "deployments"}, []string{"cairn-admin", "create", "patch", "default/web"}},
		{"get --at", c.kubeconfigEnv(), []string{"get", "deployments", "web", "-n", "default", "--at", c.created}, []string{`"replicas": 1`}},
		{"get --at list", c.kubeconfigEnv(), []string{"get", "deployments", "--at", c.scaled}, []string{"default", "web"}},
		{"diff", c.kubeconfigEnv(), []string{"diff", "deployment/web", "--from", c.created, "--to", c.scaled}, []string{"spec.replicas"}},
		{"events tail", c.kubeconfigEnv(), []string{"events", "tail", "--no-follow", "--kind", "deployments", "--name", "web"},
			[]string{"ADDED Deployment default/web cairn-admin", "MODIFIED Deployment default/web cairn-admin"}},
		{"merged KUBECONFIG: timeline", merged, []string{"timeline", "deployment/web"}, timeline},
		{"merged KUBECONFIG: events tail", merged, []string{"events", "tail", "--no-follow", "--kind", "deployments", "--name", "web"},
			[]string{"ADDED Deployment default/web"}},
		{"--kubeconfig over KUBECONFIG", other, []string{"audit", "--kubeconfig", kc, "--user", "cairn-admin"}, []string{"default/web"}},
		{"--kubeconfig, events tail", other, []string{"events", "tail", "--no-follow", "--kubeconfig", kc, "--kind", "deployments"},
			[]string{"Deployment default/web"}},
		{"--data-dir over KUBECONFIG", other, []string{"timeline", "deployment/web", "--data-dir", c.dir}, timeline},
		{"--data-dir, events tail", noEnv, []string{"events", "tail", "--no-follow", "--data-dir", c.dir, "--kind", "deployments"},
			[]string{"Deployment default/web"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := c.run(t, tt.env, tt.args...)
			if r.Err != nil {
				t.Fatalf("%s", r)
			}
			for _, w := range tt.want {
				if !strings.Contains(r.Stdout, w) {
					t.Errorf("stdout lacks %q:\n%s", w, r.Stdout)
				}
			}
		})
	}
}

// testVerify runs events verify with KUBECONFIG; it retries while the log
// catches up with the controllers' last writes.
func (c *cluster) testVerify(t *testing.T) {
	for _, tt := range []struct {
		name string
		env  []string
		args []string
	}{
		{"KUBECONFIG", c.kubeconfigEnv(), []string{"events", "verify"}},
		{"--data-dir", []string{"KUBECONFIG="}, []string{"events", "verify", "--data-dir", c.dir}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c.eventually(t, "events verify to pass", func() error {
				r := c.run(t, tt.env, tt.args...)
				if r.Err == nil && !strings.Contains(r.Stdout, "verify: OK") {
					return errors.New("no verify: OK in " + r.Stdout)
				}
				return resultErr(r)
			})
		})
	}
}

// testErrors: a kubeconfig that is not there, no kubeconfig at all, and a
// kubeconfig away from any data directory for a command that needs etcd and
// NATS each fail with exit code 1 and one line that says what to do.
func (c *cluster) testErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope", "kubeconfig")
	// A copy of the admin kubeconfig outside the data directory still
	// reaches the apiserver, but has no endpoints file next to it.
	away := filepath.Join(t.TempDir(), "config")
	b, err := os.ReadFile(c.up.Kubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(away, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if r := c.run(t, []string{"KUBECONFIG=" + away}, "audit", "--kind", "deployments"); r.Err != nil || !strings.Contains(r.Stdout, "default/web") {
		t.Errorf("audit with a kubeconfig away from the data directory: %s", r)
	}
	tests := []struct {
		name string
		env  []string
		args []string
		want []string
	}{
		{"KUBECONFIG names no file", []string{"KUBECONFIG=" + missing}, []string{"timeline", "deployment/web"},
			[]string{"cairn timeline: no kubeconfig", missing}},
		{"--kubeconfig names no file", nil, []string{"audit", "--kubeconfig", missing}, []string{"cairn audit: --kubeconfig " + missing, "no such file"}},
		{"--kubeconfig names no file: events", nil, []string{"events", "verify", "--kubeconfig", missing}, []string{"cairn events: --kubeconfig " + missing}},
		{"no KUBECONFIG and no .cairn here", []string{"KUBECONFIG="}, []string{"get", "deployments", "--at", "1"},
			[]string{"cairn get: no kubeconfig", "--data-dir or --kubeconfig"}},
		{"--data-dir without a cluster", nil, []string{"diff", "deployment/web", "--from", "1", "--data-dir", filepath.Join(t.TempDir(), "empty")},
			[]string{"cairn diff: kubeconfig", "no such file"}},
		{"kubeconfig away from the data directory: events verify", []string{"KUBECONFIG=" + away}, []string{"events", "verify"},
			[]string{"cairn events: no running cairn up found next to the kubeconfig " + away, "--etcd-endpoints and --nats-url"}},
		{"kubeconfig away from the data directory: events tail", []string{"KUBECONFIG=" + away}, []string{"events", "tail", "--no-follow"},
			[]string{"cairn events: no running cairn up found next to the kubeconfig " + away, "--nats-url"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := c.run(t, tt.env, tt.args...)
			var ee *exec.ExitError
			if !errors.As(r.Err, &ee) || ee.ExitCode() != 1 {
				t.Fatalf("want exit code 1: %s", r)
			}
			msg := strings.TrimSuffix(r.Stderr, "\n")
			if strings.Contains(msg, "\n") {
				t.Errorf("stderr is more than one line:\n%s", r.Stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("stderr lacks %q: %s", w, msg)
				}
			}
		})
	}
}

// testKubelet adds a hollow node to the running cluster as the README
// says and checks its credentials and its registration.
func (c *cluster) testKubelet(t *testing.T) {
	const name = "added"
	node := name + "-0" // hollow nodes are <node-name>-<i>
	k := cairntest.NewProc(t, "kubelet", c.bin, "kubelet", "--data-dir", c.dir, "--node-name", name, "--runtime", "hollow")
	k.Start()
	c.eventually(t, "node "+node+" Ready", func() error {
		k.Alive()
		n, err := c.cs.CoreV1().Nodes().Get(t.Context(), node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				return nil
			}
		}
		return errors.New("not Ready")
	})
	if out := k.Output(); !strings.Contains(out, "node credentials issued") {
		t.Errorf("kubelet output lacks the issued credentials:\n%s", out)
	}

	// The certificate's subject is checked by the join package's test;
	// here the log shows the apiserver authenticated the node as it.
	if _, err := os.Stat(filepath.Join(c.dir, "nodes", name, "hollow.kubeconfig")); err != nil {
		t.Errorf("the hollow kubelet's kubeconfig: %v", err)
	}

	// The log says who registered the Node: the hollow kubelet's identity
	// (one credential for all its simulated nodes, which NodeRestriction
	// would refuse to a node's own).
	r := c.run(t, c.kubeconfigEnv(), "events", "tail", "--no-follow", "--json", "--kind", "nodes", "--name", node)
	if r.Err != nil {
		t.Fatalf("%s", r)
	}
	first, _, _ := strings.Cut(r.Stdout, "\n")
	var e events.Event
	if err := json.Unmarshal([]byte(first), &e); err != nil {
		t.Fatalf("events tail: %v\n%s", err, r.Stdout)
	}
	if e.Type != events.Added || e.Actor.User != "cairn:hollow-kubelet:"+name || !slices.Contains(e.Actor.Groups, "cairn:hollow-nodes") {
		t.Errorf("first event of node %s: %s by %+v, want ADDED by cairn:hollow-kubelet:%s in cairn:hollow-nodes", node, e.Type, e.Actor, name)
	}
	k.Interrupt(stopTimeout)
}
