package e2etest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"github.com/cairn-dev/cairn/services/cairn/cairntest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cairn-dev/cairn/services/cairn/up"
)

const (
	readyTimeout = 3 * time.Minute // the first start builds the images
	stopTimeout  = 60 * time.Second
	callTimeout  = 60 * time.Second
)

// requireNode skips t unless it can run a real node: root, the node's
// binaries and kubectl.
func requireNode(t testing.TB) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("e2etest: cairn up's node needs root (containerd, network namespaces, cgroups); run as root")
	}
	for _, bin := range []string{"containerd", "runc", "containerd-shim-runc-v2", "ip"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("e2etest: %s not found: run ops/node-deps.sh", bin)
		}
	}
	if _, err := os.Stat("/usr/lib/cni/bridge"); err != nil {
		t.Skip("e2etest: CNI plugins missing in /usr/lib/cni: run ops/node-deps.sh")
	}
	if _, err := os.Stat("/usr/bin/kubectl"); err == nil {
		return "/usr/bin/kubectl"
	}
	p, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("e2etest: kubectl not installed")
	}
	return p
}

// cluster is one `cairn up` child process with its real node.
type cluster struct {
	kubectl, dataDir, home, kubeconfig string
	cmd                                *exec.Cmd
	stdout, stderr                     *cairntest.Buffer
	done                               chan struct{}
	waitErr                            error
	stopped                            bool
}

// startCluster runs `cairn up --data-dir dataDir --listen addr` (node
// included) and waits until the apiserver answers /readyz and the node is
// Ready. t.Cleanup kills it if the test did not stop it.
func startCluster(t testing.TB, bin, kubectl, dataDir, addr string) *cluster {
	t.Helper()
	c := &cluster{
		kubectl: kubectl, dataDir: dataDir, home: t.TempDir(),
		kubeconfig: filepath.Join(dataDir, "kubeconfig"),
		stdout:     &cairntest.Buffer{}, stderr: &cairntest.Buffer{}, done: make(chan struct{}),
	}
	c.cmd = exec.Command(bin, "up", "--data-dir", dataDir, "--listen", addr)
	c.cmd.Stdout, c.cmd.Stderr = c.stdout, c.stderr
	if err := c.cmd.Start(); err != nil {
		t.Fatalf("start cairn up: %v", err)
	}
	go func() {
		c.waitErr = c.cmd.Wait()
		close(c.done)
	}()
	t.Cleanup(func() {
		if !c.stopped {
			// SIGINT first so the node cleans up; kill if it hangs.
			_ = c.cmd.Process.Signal(syscall.SIGINT)
			select {
			case <-c.done:
			case <-time.After(stopTimeout):
				_ = c.cmd.Process.Kill()
				<-c.done
			}
		}
		if t.Failed() {
			t.Logf("cairn up stderr (tail):\n%s", tail(c.stderr.String(), 80))
		}
	})
	deadline := time.Now().Add(readyTimeout)
	var last string
	for {
		select {
		case <-c.done:
			t.Fatalf("cairn up exited before ready: %v\nstderr:\n%s", c.waitErr, tail(c.stderr.String(), 80))
		default:
		}
		if _, err := os.Stat(c.kubeconfig); err == nil {
			r := c.run(t, "get", "nodes", "-o", "json")
			if r.err == nil {
				var nodes corev1.NodeList
				if err := json.Unmarshal([]byte(r.stdout), &nodes); err == nil && len(nodes.Items) == 1 && nodeReady(&nodes.Items[0]) {
					return c
				}
			}
			last = r.String()
		}
		if time.Now().After(deadline) {
			t.Fatalf("cairn up's node not Ready after %v; last: %s\nstderr:\n%s", readyTimeout, last, tail(c.stderr.String(), 80))
		}
		time.Sleep(300 * time.Millisecond)
	}
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// stop sends SIGINT and requires exit code 0 within stopTimeout.
func (c *cluster) stop(t testing.TB) {
	t.Helper()
	c.stopped = true
	if err := c.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatalf("signal cairn up: %v", err)
	}
	select {
	case <-c.done:
	case <-time.After(stopTimeout):
		_ = c.cmd.Process.Kill()
		<-c.done
		t.Fatalf("cairn up did not exit within %v of SIGINT\nstderr:\n%s", stopTimeout, tail(c.stderr.String(), 80))
	}
	if c.waitErr != nil {
		t.Fatalf("cairn up exited with %v (want 0)\nstderr:\n%s", c.waitErr, tail(c.stderr.String(), 80))
	}
}

// result is the outcome of one kubectl call.
type result struct {
	args           []string
	stdout, stderr string
	err            error
}

func (r result) String() string {
	return fmt.Sprintf("kubectl %s: err=%v\nstdout:\n%s\nstderr:\n%s", strings.Join(r.args, " "), r.err, r.stdout, r.stderr)
}

// run runs kubectl with the cluster's kubeconfig and a private HOME.
func (c *cluster) run(t testing.TB, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	cmd := c.command(ctx, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return result{args: args, stdout: stdout.String(), stderr: stderr.String(), err: err}
}

// command is a kubectl command with the cluster's kubeconfig and a private
// HOME.
func (c *cluster) command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, c.kubectl, args...)
	env := []string{"KUBECONFIG=" + c.kubeconfig, "HOME=" + c.home}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "KUBECONFIG=") && !strings.HasPrefix(kv, "HOME=") {
			env = append(env, kv)
		}
	}
	cmd.Env = env
	return cmd
}

// ok runs kubectl, fails t unless it exits 0, and returns stdout.
func (c *cluster) ok(t testing.TB, args ...string) string {
	t.Helper()
	r := c.run(t, args...)
	if r.err != nil {
		t.Fatalf("%s", r)
	}
	return r.stdout
}

// pods lists the pods of the default namespace matching selector.
func (c *cluster) pods(t testing.TB, selector string) []corev1.Pod {
	t.Helper()
	args := []string{"get", "pods", "-o", "json"}
	if selector != "" {
		args = append(args, "-l", selector)
	}
	var l corev1.PodList
	if err := json.Unmarshal([]byte(c.ok(t, args...)), &l); err != nil {
		t.Fatalf("kubectl get pods: %v", err)
	}
	return l.Items
}

// nodeDir is where cairn up keeps its node (package kubelet/node's Dir).
func (c *cluster) nodeDir() string { return filepath.Join(c.dataDir, "node") }

// socket is the node's containerd socket, where package kubelet/node puts
// it: under the node's directory, or under /run/cairn-node/<hash> when that
// path is too long for a unix socket.
func (c *cluster) socket() string {
	s := filepath.Join(c.nodeDir(), "containerd.sock")
	if len(s) > 100 {
		sum := sha256.Sum256([]byte(c.nodeDir()))
		s = filepath.Join("/run/cairn-node", hex.EncodeToString(sum[:6]), "containerd.sock")
	}
	return s
}

// containerdPid reads the pid of the node's containerd.
func (c *cluster) containerdPid(t testing.TB) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(c.nodeDir(), "containerd.pid"))
	if err != nil {
		t.Fatalf("containerd pid file: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("containerd pid file: %v", err)
	}
	return pid
}

// netnsPath is the node's network namespace.
func (c *cluster) netnsPath() string { return filepath.Join("/run/netns", up.NetNSName(c.dataDir)) }

// criClient opens the CRI of the node's containerd directly, not through
// cairn.
func (c *cluster) criClient(t testing.TB) runtimeapi.RuntimeServiceClient {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+c.socket(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("dial CRI %s: %v", c.socket(), err)
	}
	t.Cleanup(func() { conn.Close() })
	return runtimeapi.NewRuntimeServiceClient(conn)
}

// poll calls f every interval until it returns nil or timeout passes, then
// fails t with f's last error.
func poll(t testing.TB, timeout time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %v: %v", what, timeout, err)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// processAlive reports whether pid runs (and is no zombie).
func processAlive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && len(s) > i+2 {
		return s[i+2] != 'Z'
	}
	return true
}
