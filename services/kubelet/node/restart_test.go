package node_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cairn-dev/cairn/services/kubelet/node"
	"github.com/cairn-dev/cairn/services/kubelet/node/nodetest"
)

// ownerEnv carries "<dir> <netns>" to the child owner process.
const ownerEnv = "CAIRN_NODE_TEST_OWNER"

// TestHelperNodeOwner is not a test: it is the owner process of
// TestRestartAfterOwnerKilled, which runs the test binary again with this
// test selected and ownerEnv set. It starts the node as `cairn up` does
// (containerd not tied to its life), runs a pod, prints "owner-ready
// <containerd pid> <container pid>" and waits to be killed.
func TestHelperNodeOwner(t *testing.T) {
	args := strings.Fields(os.Getenv(ownerEnv))
	if len(args) != 2 {
		t.Skip("only run by TestRestartAfterOwnerKilled")
	}
	ctx := ctxT(t, 2*time.Minute) // never outlive the parent by much
	rt, err := node.Start(ctx, node.Config{Dir: args[0], NetNS: args[1], CreateNetNS: true, Images: nodetest.Images(t)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Stop(context.Background())
	p, err := startPod(ctx, rt, podSpec{name: "survivor", command: []string{"sleep", "3600"}}, filepath.Join(args[0], "pod-logs"))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("owner-ready %d %d\n", rt.Pid(), containerPid(ctx, t, rt, p.containerID))
	<-ctx.Done()
}

// killedOwner runs a node in a child process, SIGKILLs the child once its
// pod runs, and returns the config and what the child left running.
func killedOwner(t *testing.T) (cfg node.Config, containerd, container int) {
	t.Helper()
	var b [4]byte
	_, _ = rand.Read(b[:])
	cfg = node.Config{Dir: t.TempDir(), NetNS: "cairn-t-" + hex.EncodeToString(b[:]), CreateNetNS: true, Images: nodetest.Images(t)}
	// Whatever the test leaves (it failed), the cleanup stops.
	t.Cleanup(func() { _ = node.Clean(context.Background(), cfg, nil) })
	cmd := osexec.Command(os.Args[0], "-test.run=^TestHelperNodeOwner$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), ownerEnv+"="+cfg.Dir+" "+cfg.NetNS)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 1)
	var tail []string
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "owner-ready ") {
				lines <- sc.Text()
			}
			tail = append(tail, sc.Text())
		}
		close(lines)
	}()
	line, ok := <-lines
	if !ok || line == "" {
		_ = cmd.Wait()
		t.Fatalf("the owner process never ran its pod:\n%s", strings.Join(tail, "\n"))
	}
	if _, err := fmt.Sscanf(line, "owner-ready %d %d", &containerd, &container); err != nil {
		t.Fatalf("owner said %q: %v", line, err)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if !alive(containerd) || !alive(container) {
		t.Fatalf("after the owner's SIGKILL: containerd %d alive %v, container %d alive %v; want both left running",
			containerd, alive(containerd), container, alive(container))
	}
	return cfg, containerd, container
}

// TestRestartAfterOwnerKilled SIGKILLs the process that runs a node, as a
// SIGKILL of `cairn up` does, and starts the node again on the same
// directory: the new owner must take over the containerd left running (or,
// if it stops before starting the node, stop it), whether or not the pid
// file survived, and stop any second containerd of the node; the node must
// work, and its Stop must leave no containerd, shim, container process,
// mount or namespace behind.
func TestRestartAfterOwnerKilled(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	for _, tc := range []struct {
		name string
		// after runs between the kill and the restart, and returns another
		// process the restart must stop, or 0.
		after func(t *testing.T, cfg node.Config) int
		// clean restarts with node.Clean instead of Start: an owner that
		// stops before it starts the node.
		clean bool
	}{
		{name: "pid file kept"},
		{name: "pid file lost", after: func(t *testing.T, cfg node.Config) int {
			// As if the kill came between the launch and the pid file.
			if err := os.Remove(filepath.Join(cfg.Dir, "containerd.pid")); err != nil {
				t.Fatal(err)
			}
			return 0
		}},
		{name: "second containerd", after: secondContainerd},
		{name: "stopped before starting the node", clean: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := ctxT(t, 2*time.Minute)
			cfg, containerd, container := killedOwner(t)
			extra := 0
			if tc.after != nil {
				extra = tc.after(t, cfg)
			}
			dir, sock := cfg.Dir, filepath.Join(cfg.Dir, "containerd.sock")
			shims := nodetest.Shims(t, sock)
			if len(shims) == 0 {
				t.Fatal("no shim of the killed owner's pod")
			}
			netns := "/run/netns/" + cfg.NetNS
			if tc.clean {
				if err := node.Clean(ctx, cfg, nil); err != nil {
					t.Fatalf("Clean: %v", err)
				}
			} else {
				rt, err := node.Start(ctx, cfg, nil)
				if err != nil {
					t.Fatalf("restart: %v", err)
				}
				if !rt.Adopted() || rt.Pid() != containerd {
					t.Errorf("restart: adopted %v, containerd %d; want %d adopted", rt.Adopted(), rt.Pid(), containerd)
				}
				if extra != 0 && alive(extra) {
					t.Errorf("the second containerd %d still runs after the restart", extra)
				}
				if got := nodetest.Containerds(t, cfg.Dir); len(got) != 1 {
					t.Errorf("containerd processes of the node after the restart: %v, want one", got)
				}
				if !alive(container) {
					t.Errorf("the pod's container %d did not survive the restart", container)
				}
				p := runPod(ctx, t, rt, podSpec{name: "after", command: []string{"sleep", "3600"}})
				st, err := rt.RuntimeService().ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: p.containerID})
				if err != nil || st.GetStatus().GetState() != runtimeapi.ContainerState_CONTAINER_RUNNING {
					t.Errorf("a pod run after the restart: %v, %v", st.GetStatus().GetState(), err)
				}
				shims = append(shims, nodetest.Shims(t, sock)...)
				if err := rt.Stop(ctx); err != nil {
					t.Errorf("Stop: %v", err)
				}
			}
			for _, pid := range append([]int{containerd, container, extra}, shims...) {
				if pid != 0 && alive(pid) {
					t.Errorf("process %d still running after the stop", pid)
				}
			}
			if got := nodetest.Containerds(t, cfg.Dir); len(got) != 0 {
				t.Errorf("containerd processes of the node after the stop: %v", got)
			}
			if m := mountsUnder(t, dir); len(m) != 0 {
				t.Errorf("mounts left: %v", m)
			}
			if _, err := os.Stat(netns); !os.IsNotExist(err) {
				t.Errorf("namespace %s left (%v)", netns, err)
			}
		})
	}
}

// secondContainerd starts another containerd on the node's config, as a
// restart that missed the first one would: it waits for the first's
// metadata lock. It returns its pid.
func secondContainerd(t *testing.T, cfg node.Config) int {
	t.Helper()
	cmd := osexec.Command("containerd", "--config", filepath.Join(cfg.Dir, "containerd.toml"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	time.Sleep(300 * time.Millisecond)
	select {
	case <-done:
		t.Fatal("the second containerd exited at once")
	default:
	}
	return cmd.Process.Pid
}
