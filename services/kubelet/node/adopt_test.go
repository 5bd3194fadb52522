package node_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strconv"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cairn-dev/cairn/services/kubelet/node"
	"github.com/cairn-dev/cairn/services/kubelet/node/nodetest"
)

// TestStartAdoptsRunningContainerd starts a node, runs a pod, then starts
// the same node again as a restarted owner would (the first Runtime is
// abandoned, not stopped): the second Start must adopt the running
// containerd, keep the container running untouched, and its Stop must
// clean up everything, including the namespace the first Start created.
func TestStartAdoptsRunningContainerd(t *testing.T) {
	ctx, cfg, first := startFirst(t)
	p := runPod(ctx, t, first, podSpec{name: "survivor", command: []string{"sleep", "3600"}})
	pid := containerPid(ctx, t, first, p.containerID)

	second, err := node.Start(ctx, cfg, nil)
	if err != nil {
		t.Fatalf("second Start: %v", err)
	}
	if !second.Adopted() || second.Pid() != first.Pid() {
		t.Fatalf("second Start: adopted=%v pid %d, want containerd %d adopted", second.Adopted(), second.Pid(), first.Pid())
	}
	st, err := second.RuntimeService().ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: p.containerID})
	if err != nil || st.Status.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Fatalf("container after adoption: %v, %v", st.GetStatus().GetState(), err)
	}
	if got := containerPid(ctx, t, second, p.containerID); got != pid {
		t.Errorf("container pid %d after adoption, was %d: it was restarted", got, pid)
	}

	if err := second.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	for _, pid := range []int{pid, first.Pid()} {
		if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err == nil {
			t.Errorf("process %d still running after Stop", pid)
		}
	}
	if _, err := os.Stat(second.NetNSPath()); !os.IsNotExist(err) {
		t.Errorf("namespace %s left after Stop (%v)", second.NetNSPath(), err)
	}
	if m := mountsUnder(t, cfg.Dir); len(m) != 0 {
		t.Errorf("mounts left: %v", m)
	}
}

// TestCancelledStartLeavesNamespaceToClean starts a node and abandons it
// (its owner killed), then starts it again with a context already
// cancelled, so that the second Start fails while it sets the namespace up,
// before it knows the namespace is this node's. Clean afterwards must still
// stop the abandoned containerd and delete the namespace the first Start
// created.
func TestCancelledStartLeavesNamespaceToClean(t *testing.T) {
	ctx, cfg, first := startFirst(t)
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := node.Start(cancelled, cfg, nil); err == nil {
		t.Fatal("Start with a cancelled context succeeded")
	}
	if _, err := os.Stat(first.NetNSPath()); err != nil {
		t.Fatalf("namespace after the cancelled Start: %v", err)
	}
	if err := node.Clean(ctx, cfg, nil); err != nil {
		t.Fatalf("Clean: %v", err)
	}
	if _, err := os.Stat("/proc/" + strconv.Itoa(first.Pid())); err == nil {
		t.Errorf("containerd %d still running after Clean", first.Pid())
	}
	if _, err := os.Stat(first.NetNSPath()); !os.IsNotExist(err) {
		t.Errorf("namespace %s left after Clean (%v)", first.NetNSPath(), err)
	}
}

// startFirst starts a node in a namespace of its own (as root) for a test
// that abandons it, as a killed owner would.
func startFirst(t *testing.T) (context.Context, node.Config, *node.Runtime) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	ctx := ctxT(t, 2*time.Minute)
	var b [4]byte
	_, _ = rand.Read(b[:])
	cfg := node.Config{Dir: t.TempDir(), NetNS: "cairn-t-" + hex.EncodeToString(b[:]), CreateNetNS: true, Images: nodetest.Images(t)}
	first, err := node.Start(ctx, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = first.Stop(context.Background()) }) // only if the test fails early
	return ctx, cfg, first
}
