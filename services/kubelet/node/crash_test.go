package node_test

import (
	"context"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/services/kubelet/node/nodetest"
	"github.com/cairn-dev/cairn/services/procstat"
)

// TestRunCleansUpAfterContainerdCrash SIGKILLs containerd under Run while a
// pod runs: Run must return an error, and the clean-up that follows, with no
// containerd to ask, must still kill the shims and container processes
// this node started and leave no mount or namespace behind.
func TestRunCleansUpAfterContainerdCrash(t *testing.T) {
	rt := nodetest.Start(t)
	ctx := ctxT(t, 2*time.Minute)
	p := runPod(ctx, t, rt, podSpec{name: "orphan", command: []string{"sleep", "3600"}})
	pid := containerPid(ctx, t, rt, p.containerID)
	shims := nodetest.Shims(t, rt.Socket())
	if len(shims) == 0 {
		t.Fatal("no shim found for the node's socket")
	}

	runErr := make(chan error, 1)
	go func() { runErr <- rt.Run(context.Background()) }()
	if err := syscall.Kill(rt.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-runErr:
		if err == nil || !strings.Contains(err.Error(), "exited") {
			t.Errorf("Run after containerd was killed: %v, want an exit error", err)
		}
	case <-ctx.Done():
		t.Fatal("Run did not return after containerd was killed")
	}
	for _, pid := range append([]int{pid, rt.Pid()}, shims...) {
		if alive(pid) {
			t.Errorf("process %d still running after clean-up", pid)
		}
	}
	if m := mountsUnder(t, rt.Dir()); len(m) != 0 {
		t.Errorf("mounts left: %v", m)
	}
	if _, err := os.Stat(rt.NetNSPath()); !os.IsNotExist(err) {
		t.Errorf("namespace %s left (%v)", rt.NetNSPath(), err)
	}
}

// alive reports whether pid runs (exists and is not a zombie: a killed
// shim's parent is the machine's init, which reaps when it likes).
func alive(pid int) bool { return procstat.Alive(pid) }
