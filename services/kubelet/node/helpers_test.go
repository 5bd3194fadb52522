package node_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cairn-dev/cairn/ops/images"
	"github.com/cairn-dev/cairn/services/kubelet/node"
	"github.com/cairn-dev/cairn/services/kubelet/node/nodetest"
)

// pod is one sandbox with one container, made through the CRI.
type pod struct {
	name, uid   string
	sandboxTook time.Duration // RunPodSandbox
	createTook  time.Duration // CreateContainer
	startTook   time.Duration // StartContainer
	sandboxID   string
	containerID string
	ip          string
	logDir      string
	cfg         *runtimeapi.PodSandboxConfig
}

type podSpec struct {
	name     string
	image    string
	command  []string
	memory   int64 // bytes; 0 for none
	cpuMilli int64
}

func ctxT(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// runPod creates and starts a sandbox and its container and returns once
// the container is running.
func runPod(ctx context.Context, t testing.TB, rt *node.Runtime, s podSpec) *pod {
	t.Helper()
	p, err := startPod(ctx, rt, s, t.TempDir())
	if err != nil {
		b, _ := os.ReadFile(rt.LogPath())
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		t.Fatalf("%v\ncontainerd log tail:\n%s", err, strings.Join(lines[max(0, len(lines)-15):], "\n"))
	}
	return p
}

func startPod(ctx context.Context, rt *node.Runtime, s podSpec, logRoot string) (*pod, error) {
	var b [6]byte
	_, _ = rand.Read(b[:])
	uid := hex.EncodeToString(b[:])
	if s.image == "" {
		s.image = images.BusyboxRef
	}
	p := &pod{name: s.name, uid: uid, logDir: filepath.Join(logRoot, "pods", uid)}
	if err := os.MkdirAll(p.logDir, 0o755); err != nil {
		return nil, err
	}
	p.cfg = &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: s.name, Namespace: "default", Uid: uid},
		Hostname:     s.name,
		LogDirectory: p.logDir,
		Linux: &runtimeapi.LinuxPodSandboxConfig{
			CgroupParent: rt.CgroupParent() + "/pod" + uid,
			SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
				NamespaceOptions: &runtimeapi.NamespaceOption{
					Network: runtimeapi.NamespaceMode_POD,
					Pid:     runtimeapi.NamespaceMode_CONTAINER,
					Ipc:     runtimeapi.NamespaceMode_POD,
				},
			},
		},
	}
	rs := rt.RuntimeService()
	t0 := time.Now()
	sb, err := rs.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: p.cfg})
	if err != nil {
		return nil, fmt.Errorf("RunPodSandbox %s: %w", s.name, err)
	}
	p.sandboxTook = time.Since(t0)
	p.sandboxID = sb.PodSandboxId
	st, err := rs.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: p.sandboxID})
	if err != nil {
		return nil, fmt.Errorf("PodSandboxStatus: %w", err)
	}
	p.ip = st.GetStatus().GetNetwork().GetIp()

	res := &runtimeapi.LinuxContainerResources{}
	if s.memory > 0 {
		res.MemoryLimitInBytes = s.memory
	}
	if s.cpuMilli > 0 {
		res.CpuPeriod = 100000
		res.CpuQuota = s.cpuMilli * 100
	}
	t1 := time.Now()
	cc, err := rs.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{
		PodSandboxId: p.sandboxID,
		Config: &runtimeapi.ContainerConfig{
			Metadata: &runtimeapi.ContainerMetadata{Name: "main"},
			Image:    &runtimeapi.ImageSpec{Image: s.image},
			Command:  s.command,
			LogPath:  "main/0.log",
			Linux:    &runtimeapi.LinuxContainerConfig{Resources: res},
		},
		SandboxConfig: p.cfg,
	})
	if err != nil {
		return nil, fmt.Errorf("CreateContainer %s: %w", s.name, err)
	}
	p.containerID = cc.ContainerId
	t2 := time.Now()
	p.createTook = t2.Sub(t1)
	if _, err := rs.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: p.containerID}); err != nil {
		return nil, fmt.Errorf("StartContainer %s: %w", s.name, err)
	}
	p.startTook = time.Since(t2)
	return p, nil
}

// exec runs cmd in the pod's container and returns stdout; a non-zero exit
// fails t.
func exec(ctx context.Context, t testing.TB, rt *node.Runtime, p *pod, cmd ...string) string {
	t.Helper()
	r, err := rt.RuntimeService().ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: p.containerID, Cmd: cmd, Timeout: 20})
	if err != nil {
		t.Fatalf("ExecSync %v in %s: %v", cmd, p.name, err)
	}
	if r.ExitCode != 0 {
		t.Fatalf("ExecSync %v in %s: exit %d: %s%s", cmd, p.name, r.ExitCode, r.Stdout, r.Stderr)
	}
	return string(r.Stdout)
}

// containerPid is the host pid of the container's process (from the
// verbose CRI status).
func containerPid(ctx context.Context, t testing.TB, rt *node.Runtime, id string) int {
	t.Helper()
	st, err := rt.RuntimeService().ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id, Verbose: true})
	if err != nil {
		t.Fatal(err)
	}
	var info struct {
		Pid int `json:"pid"`
	}
	if err := json.Unmarshal([]byte(st.Info["info"]), &info); err != nil || info.Pid == 0 {
		t.Fatalf("container %s: no pid in verbose status: %v", id, err)
	}
	return info.Pid
}

// sandboxNetNS is the path of the pod's network namespace.
func sandboxNetNS(ctx context.Context, t testing.TB, rt *node.Runtime, id string) string {
	t.Helper()
	path, err := nodetest.SandboxNetNS(ctx, rt.RuntimeService(), id)
	if err != nil {
		t.Fatal(err)
	}
	if path == "" {
		t.Fatalf("sandbox %s: no network namespace path", id)
	}
	return path
}

// mountsUnder lists the mount points at or below dir.
func mountsUnder(t testing.TB, dir string) []string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && (f[4] == dir || strings.HasPrefix(f[4], dir+"/")) {
			out = append(out, f[4])
		}
	}
	return out
}

// cgroupPath is the container process's path in a cgroup v1 controller.
func cgroupPath(t testing.TB, pid int, controller string) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			if c == controller {
				return filepath.Join("/sys/fs/cgroup", controller, parts[2])
			}
		}
		if parts[0] == "0" && parts[1] == "" { // cgroup v2
			return filepath.Join("/sys/fs/cgroup", parts[2])
		}
	}
	t.Fatalf("pid %d has no %s cgroup", pid, controller)
	return ""
}

// eventually retries f until it returns nil, for at most 30s or until ctx
// ends.
func eventually(ctx context.Context, t testing.TB, what string, f func() error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var last error
	for {
		err := f()
		if err == nil {
			return
		}
		if ctx.Err() == nil || last == nil {
			last = err
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: %v", what, last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
