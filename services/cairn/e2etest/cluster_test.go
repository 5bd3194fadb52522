package e2etest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
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

	"github.com/cairn-dev/cairn/services/cairn/cairntest"
	"github.com/cairn-dev/cairn/services/cairn/up"
	"github.com/cairn-dev/cairn/services/procstat"
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
	return cairntest.KubectlPath(t)
}

// cluster is one `cairn up` child process with its real node, and the
// kubectl that talks to it.
type cluster struct {
	*cairntest.Up
	*cairntest.Kubectl
}

// startCluster runs `cairn up --data-dir dataDir --listen addr` (node
// included) and waits until the node is Ready. t's cleanup stops it
// (SIGINT, so that the node cleans up) if the test did not.
func startCluster(t testing.TB, bin, kubectl, dataDir, addr string) *cluster {
	t.Helper()
	return startClusterWith(t, kubectl, cairntest.UpConfig{Bin: bin, DataDir: dataDir, Addr: addr, StopTimeout: stopTimeout})
}

// startClusterWith is startCluster for a `cairn up` as cfg says.
func startClusterWith(t testing.TB, kubectl string, cfg cairntest.UpConfig) *cluster {
	t.Helper()
	u := cairntest.StartUp(t, t, cfg)
	c := &cluster{Up: u, Kubectl: &cairntest.Kubectl{Path: kubectl, Kubeconfig: u.Kubeconfig(), Home: t.TempDir(), Timeout: callTimeout}}
	c.WaitReady(t, readyTimeout, func() error {
		r := c.Run(t, "get", "nodes", "-o", "json")
		if r.Err == nil {
			var nodes corev1.NodeList
			if err := json.Unmarshal([]byte(r.Stdout), &nodes); err == nil && len(nodes.Items) == 1 && nodeReady(&nodes.Items[0]) {
				return nil
			}
		}
		return fmt.Errorf("node not Ready: %s", r)
	})
	return c
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
func (c *cluster) stop(t testing.TB) { c.Stop(t, syscall.SIGINT) }

// pods lists the pods of the default namespace matching selector.
func (c *cluster) pods(t testing.TB, selector string) []corev1.Pod {
	t.Helper()
	args := []string{"get", "pods", "-o", "json"}
	if selector != "" {
		args = append(args, "-l", selector)
	}
	var l corev1.PodList
	if err := json.Unmarshal([]byte(c.OK(t, args...)), &l); err != nil {
		t.Fatalf("kubectl get pods: %v", err)
	}
	return l.Items
}

// nodeDir is where cairn up keeps its node (package kubelet/node's Dir).
func (c *cluster) nodeDir() string { return filepath.Join(c.DataDir, "node") }

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
func (c *cluster) netnsPath() string { return filepath.Join("/run/netns", up.NetNSName(c.DataDir)) }

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

// processAlive reports whether pid runs (and is no zombie).
func processAlive(pid int) bool { return procstat.Alive(pid) }
