// Package nodetest starts a real node runtime (a private containerd with
// CRI, runc and CNI in a network namespace of the test's own) for a test.
package nodetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cairn-dev/cairn/ops/images"
	"github.com/cairn-dev/cairn/services/kubelet/node"
	"github.com/cairn-dev/cairn/services/procstat"
)

var (
	imagesOnce sync.Once
	builtImgs  []images.Image
	imagesErr  error
)

// Images builds the ops/images set once per test binary into the user
// cache directory (rebuilds are no-ops: the archives are deterministic).
func Images(t testing.TB) []images.Image {
	t.Helper()
	imagesOnce.Do(func() {
		dir, err := os.UserCacheDir()
		if err != nil {
			dir = os.TempDir()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		builtImgs, imagesErr = images.Build(ctx, filepath.Join(dir, "cairn", "images"))
	})
	if imagesErr != nil {
		t.Fatalf("nodetest: build images: %v", imagesErr)
	}
	return builtImgs
}

// Option changes the Config nodetest.Start uses.
type Option func(*node.Config)

// WithPodCIDR sets the node's pod CIDR (default 10.88.0.0/24).
func WithPodCIDR(cidr string) Option { return func(c *node.Config) { c.PodCIDR = cidr } }

// Start runs a node for t: containerd with its own config under
// t.TempDir(), inside a new network namespace "cairn-t-<random>", with the
// busybox and pause images imported. t.Cleanup stops it, which removes every
// pod, the daemon, its mounts and the namespace. It skips t when not root
// and fails it when containerd, runc, the CNI plugins or busybox are
// missing (ops/node-deps.sh installs them).
func Start(t testing.TB, opts ...Option) *node.Runtime {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("nodetest: needs root (network namespaces, mounts, cgroups)")
	}
	for _, bin := range []string{"containerd", "runc", "containerd-shim-runc-v2", "ip"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Fatalf("nodetest: %s not found: run ops/node-deps.sh", bin)
		}
	}
	if _, err := os.Stat("/usr/lib/cni/bridge"); err != nil {
		t.Fatalf("nodetest: CNI plugins missing in /usr/lib/cni: run ops/node-deps.sh")
	}
	imgs := Images(t)
	var b [4]byte
	_, _ = rand.Read(b[:])
	cfg := node.Config{
		Dir:            t.TempDir(),
		NetNS:          "cairn-t-" + hex.EncodeToString(b[:]),
		CreateNetNS:    true,
		Images:         imgs,
		KillWithParent: true,
	}
	for _, o := range opts {
		o(&cfg)
	}
	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rt, err := node.Start(ctx, cfg, log)
	if err != nil {
		t.Fatalf("nodetest: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := rt.Stop(ctx); err != nil {
			t.Errorf("nodetest: stop node: %v", err)
		}
	})
	return rt
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Logf("%s", p)
	return len(p), nil
}

// SandboxNetNS returns the path of a pod sandbox's network namespace from
// the runtime's verbose sandbox status; "" when it has none (a stopped
// sandbox).
func SandboxNetNS(ctx context.Context, rs runtimeapi.RuntimeServiceClient, id string) (string, error) {
	st, err := rs.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id, Verbose: true})
	if err != nil {
		return "", fmt.Errorf("CRI PodSandboxStatus %s: %w", id, err)
	}
	var info struct {
		RuntimeSpec struct {
			Linux struct {
				Namespaces []struct {
					Type string `json:"type"`
					Path string `json:"path"`
				} `json:"namespaces"`
			} `json:"linux"`
		} `json:"runtimeSpec"`
	}
	if err := json.Unmarshal([]byte(st.Info["info"]), &info); err != nil {
		return "", fmt.Errorf("sandbox %s verbose info: %w", id, err)
	}
	for _, ns := range info.RuntimeSpec.Linux.Namespaces {
		if ns.Type == "network" && ns.Path != "" {
			return ns.Path, nil
		}
	}
	return "", nil
}

// Containerds lists the live processes running containerd with the config
// of the node whose Config.Dir is dir.
func Containerds(t testing.TB, dir string) []int {
	t.Helper()
	want := "--config\x00" + filepath.Join(dir, "containerd.toml") + "\x00"
	return procs(t, func(cmdline string) bool { return strings.HasSuffix(cmdline, want) })
}

// Shims lists the live containerd shims serving the containerd socket sock.
func Shims(t testing.TB, sock string) []int {
	t.Helper()
	return procs(t, func(cmdline string) bool {
		cmd := strings.ReplaceAll(cmdline, "\x00", " ")
		return strings.Contains(cmd, "containerd-shim") && strings.Contains(cmd, "-address "+sock+" ")
	})
}

// procs lists the live processes (zombies excluded) whose NUL-separated
// command line match accepts.
func procs(t testing.TB, match func(cmdline string) bool) []int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil || !match(string(b)) {
			continue
		}
		if procstat.Alive(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// CPU is the processor time used so far by the node's process tree:
// containerd, its shims and everything below them (runc or crun, the
// containers' processes), counting the children they have already reaped
// (CNI plugins, shim start-ups, runtime invocations). Unlike the machine's
// /proc/stat, it leaves out whatever else runs on the machine, so that a
// benchmark's CPU per pod does not depend on what shares the cores.
func CPU(t testing.TB, pid int, sock string) time.Duration {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	type proc struct {
		ppid int
		cpu  time.Duration // its own and its reaped children's
	}
	all := map[int]proc{}
	roots := map[int]bool{pid: true}
	for _, s := range Shims(t, sock) {
		roots[s] = true
	}
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := procstat.Read(p)
		if err != nil {
			continue
		}
		all[p] = proc{st.PPID, st.TreeCPU()}
	}
	in := func(p int) bool {
		for range 64 { // depth bound: a cycle cannot happen, but /proc is read non-atomically
			if roots[p] {
				return true
			}
			q, ok := all[p]
			if !ok || q.ppid <= 1 {
				return false
			}
			p = q.ppid
		}
		return false
	}
	var cpu time.Duration
	for p, q := range all {
		if in(p) {
			cpu += q.cpu
		}
	}
	return cpu
}
