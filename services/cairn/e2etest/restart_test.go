package e2etest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/cairn-dev/cairn/services/cairn/cairntest"
	"github.com/cairn-dev/cairn/services/cairn/up"
	"github.com/cairn-dev/cairn/services/kubelet/node"
	"github.com/cairn-dev/cairn/services/kubelet/node/nodetest"
)

// TestRestartAfterKill SIGKILLs `cairn up`, node included, while a pod
// runs, three times (the second time early in its start), restarting it on
// the same data directory: each restart adopts the containerd left running
// (one containerd of the node at any time, the same one throughout) and the
// pod keeps running. Then it kills it once more and stops the next start
// with SIGINT as soon as its control plane is ready, before its node
// starts: that leaves no containerd, shim or network namespace of the node.
func TestRestartAfterKill(t *testing.T) {
	kubectl := requireNode(t)
	bin := cairntest.Build(t)
	dataDir, addr := t.TempDir(), cairntest.FreeAddr(t)
	// Runs last: whatever a failed test leaves running, it stops.
	t.Cleanup(func() {
		_ = node.Clean(context.Background(), node.Config{Dir: filepath.Join(dataDir, "node"), NetNS: up.NetNSName(dataDir), CreateNetNS: true}, nil)
	})
	c := startCluster(t, bin, kubectl, dataDir, addr)
	file := filepath.Join(t.TempDir(), "ticker.yaml")
	if err := os.WriteFile(file, []byte(tickerPod), 0o644); err != nil {
		t.Fatal(err)
	}
	c.OK(t, "apply", "-f", file)
	c.waitRunning(t, "ticker")
	containerd := c.containerdPid(t)
	for i := range 3 {
		c.Stop(t, syscall.SIGKILL)
		if got := c.containerds(t); len(got) != 1 || got[0] != containerd {
			t.Fatalf("kill %d: containerd processes of the node %v, want %d left running", i, got, containerd)
		}
		if i == 1 {
			// Killed again while starting, maybe while adopting.
			u := cairntest.StartUp(t, t, cairntest.UpConfig{Bin: bin, DataDir: dataDir, Addr: addr, StopTimeout: stopTimeout})
			time.Sleep(time.Duration(500+rand.IntN(2500)) * time.Millisecond)
			u.Stop(t, syscall.SIGKILL)
		}
		begin := time.Now()
		c = startCluster(t, bin, kubectl, dataDir, addr)
		// The Node object may still be Ready from before the kill: wait
		// for this process's node.
		c.WaitReady(t, readyTimeout, func() error {
			if !strings.Contains(c.Stdout(), "\nnode ready") {
				return errors.New("no node ready line yet")
			}
			return nil
		})
		t.Logf("restart %d: node ready after %v", i, time.Since(begin).Round(time.Millisecond))
		if got := c.containerds(t); len(got) != 1 || got[0] != containerd {
			t.Fatalf("restart %d: containerd processes of the node %v, want %d adopted", i, got, containerd)
		}
		c.waitRunning(t, "ticker")
	}
	shims := nodetest.Shims(t, c.socket())
	if len(shims) == 0 {
		t.Fatal("no shim of the node's containerd")
	}
	// Killed once more, then started and stopped before its node starts:
	// what the killed one left must go all the same.
	c.Stop(t, syscall.SIGKILL)
	u := cairntest.StartUp(t, t, cairntest.UpConfig{Bin: bin, DataDir: dataDir, Addr: addr, StopTimeout: stopTimeout})
	u.WaitReady(t, readyTimeout, func() error {
		if !strings.Contains(u.Stdout(), "\nlog ready") {
			return errors.New("log not ready yet")
		}
		return nil
	})
	u.Stop(t, syscall.SIGINT)
	if got := c.containerds(t); len(got) != 0 {
		t.Errorf("containerd processes of the node after SIGINT: %v", got)
	}
	for _, pid := range shims {
		if processAlive(pid) {
			t.Errorf("shim %d still running after SIGINT", pid)
		}
	}
	if _, err := os.Stat(c.netnsPath()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("node network namespace %s still there (stat: %v)", c.netnsPath(), err)
	}
}

// waitRunning waits until the pod is Running.
func (c *cluster) waitRunning(t *testing.T, name string) {
	t.Helper()
	poll(t, podWait, "pod "+name+" Running", func() error {
		for _, p := range c.pods(t, "") {
			if p.Name == name && p.Status.Phase == corev1.PodRunning {
				return nil
			}
		}
		return fmt.Errorf("pod %s not Running", name)
	})
}

// containerds lists the live processes running containerd with the node's
// config.
func (c *cluster) containerds(t *testing.T) []int { return nodetest.Containerds(t, c.nodeDir()) }
