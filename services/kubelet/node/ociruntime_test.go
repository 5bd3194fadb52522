package node_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	osexec "os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/services/kubelet/node"
	"github.com/cairn-dev/cairn/services/kubelet/node/nodetest"
)

// TestOCIRuntimes runs a pod on a node with each OCI runtime a node can
// use, with the state on tmpfs (the default) and on disk: the container
// must be created by the runtime asked for (its own state file in the
// node's runtime root), run, and answer an exec, and Stop must leave no
// mount behind.
func TestOCIRuntimes(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	tests := []struct {
		runtime     string
		stateOnDisk bool
		stateFile   string // in <runtime root>/k8s.io/<container id>/
	}{
		{"crun", false, "status"},
		{"runc", false, "state.json"},
		{"runc", true, "state.json"},
	}
	for _, tt := range tests {
		name := tt.runtime
		if tt.stateOnDisk {
			name += "-state-on-disk"
		}
		t.Run(name, func(t *testing.T) {
			if _, err := osexec.LookPath(tt.runtime); err != nil {
				if tt.runtime == "runc" {
					t.Fatalf("runc not found: run ops/node-deps.sh")
				}
				t.Skipf("%s not installed (ops/node-deps.sh installs it)", tt.runtime)
			}
			var b [4]byte
			_, _ = rand.Read(b[:])
			cfg := node.Config{Dir: t.TempDir(), NetNS: "cairn-t-" + hex.EncodeToString(b[:]), CreateNetNS: true,
				Images: nodetest.Images(t), KillWithParent: true, OCIRuntime: tt.runtime, StateOnDisk: tt.stateOnDisk}
			ctx := ctxT(t, 2*time.Minute)
			rt, err := node.Start(ctx, cfg, nil)
			if errors.Is(err, node.ErrCrunUnusable) {
				t.Skip(err)
			}
			if err != nil {
				t.Fatal(err)
			}
			stopped := false
			t.Cleanup(func() {
				if !stopped {
					_ = rt.Stop(context.Background())
				}
			})
			if filepath.Base(rt.OCIRuntime()) != tt.runtime {
				t.Fatalf("OCIRuntime() = %s, want %s", rt.OCIRuntime(), tt.runtime)
			}
			p := runPod(ctx, t, rt, podSpec{name: "oci-" + tt.runtime, command: []string{"sleep", "3600"}})
			if _, err := os.Stat(filepath.Join(cfg.Dir, "runc", "k8s.io", p.containerID, tt.stateFile)); err != nil {
				t.Errorf("no %s state of the container: %v", tt.runtime, err)
			}
			if got := strings.TrimSpace(exec(ctx, t, rt, p, "echo", "hi")); got != "hi" {
				t.Errorf("exec echo hi = %q", got)
			}
			state := filepath.Join(cfg.Dir, "state")
			if mounted := slices.Contains(mountsUnder(t, state), state); mounted == tt.stateOnDisk {
				t.Errorf("state/ is a mount point: %v, want %v", mounted, !tt.stateOnDisk)
			}
			stopped = true
			if err := rt.Stop(ctx); err != nil {
				t.Fatal(err)
			}
			if m := mountsUnder(t, cfg.Dir); len(m) != 0 {
				t.Errorf("mounts left after Stop: %v", m)
			}
		})
	}
}
