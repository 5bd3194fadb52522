package node

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cairn-dev/cairn/services/csi/mount"
	"github.com/cairn-dev/cairn/services/procstat"
)

// CgroupParent is the cgroupfs path under which this node's pods belong
// ("/cairn/<id>"): give each pod sandbox CgroupParent()+"/pod<uid>" as
// LinuxPodSandboxConfig.CgroupParent. Stop removes the whole subtree.
func (r *Runtime) CgroupParent() string {
	sum := sha256.Sum256([]byte(r.l.dir))
	return "/cairn/" + hex.EncodeToString(sum[:6])
}

// Stop removes every pod sandbox and container through the CRI, stops
// containerd (SIGTERM, then SIGKILL after ctx's deadline or 10s), kills any
// shim or container process still left from this containerd (found by its
// socket address and its runc state, never by name), unmounts everything
// under Dir, removes the node's cgroups and deletes the network namespace
// if Start created it. The first call does the work; later calls return its
// result.
func (r *Runtime) Stop(ctx context.Context) error {
	r.stopOnce.Do(func() { r.stopErr = r.stop(ctx) })
	return r.stopErr
}

// Clean stops whatever an earlier owner of cfg.Dir left behind, as Stop
// would have: its containerd (found as Start finds one to adopt: by pid file
// and command line, never by name) with every pod, shim and container
// process, the mounts under Dir and the network namespace an earlier Start
// created. It is for an owner that stops before it starts the node (one
// that starts it adopts what was left, and its Stop cleans up); it does
// nothing when nothing was left.
func Clean(ctx context.Context, cfg Config, log *slog.Logger) error {
	if err := cfg.defaults(); err != nil {
		return err
	}
	r := newRuntime(cfg, log)
	if b, err := os.ReadFile(r.l.netnsMarker); err == nil {
		if p := strings.TrimSpace(string(b)); p != "" {
			if _, err := os.Stat(p); err == nil {
				r.netnsPath, r.netnsCreated = p, true
			}
		}
	}
	if r.adoptLeftover(ctx) {
		if err := r.dial(); err != nil {
			r.log.WarnContext(ctx, "clean: no CRI client; killing without removing pods", "err", err)
		}
	}
	return r.Stop(ctx)
}

func (r *Runtime) stop(ctx context.Context) error {
	var errs []error
	if r.pid != 0 {
		select {
		case <-r.exited:
		default:
			if r.conn == nil {
				break // failed before it could talk to containerd
			}
			if err := r.removePods(ctx); err != nil {
				r.log.WarnContext(ctx, "remove pods before stop", "err", err)
			}
		}
		if err := r.killContainerd(ctx); err != nil {
			errs = append(errs, err)
		}
		r.killLeftovers(ctx)
	}
	if err := unmountUnder(r.l.dir); err != nil {
		errs = append(errs, err)
	}
	if r.l.sockDir != r.l.dir {
		_ = unmountUnder(r.l.sockDir)
		_ = os.RemoveAll(r.l.sockDir)
	}
	if r.pid != 0 {
		r.removeCgroups()
	}
	r.release()
	if r.netnsCreated {
		if err := deleteNetNS(context.WithoutCancel(ctx), r.netnsPath); err != nil {
			errs = append(errs, err)
		}
	}
	_ = os.Remove(r.l.pidFile)
	// The marker goes with its namespace, and only then: a Start stopped
	// before it read the marker (cancelled while it set the namespace up)
	// does not know the namespace is this node's, and a later Clean must
	// still find it so.
	if b, err := os.ReadFile(r.l.netnsMarker); err == nil {
		if _, err := os.Stat(strings.TrimSpace(string(b))); errors.Is(err, os.ErrNotExist) {
			_ = os.Remove(r.l.netnsMarker)
		}
	}
	return errors.Join(errs...)
}

// removePods stops and removes every sandbox and container via the CRI.
func (r *Runtime) removePods(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	rs := r.RuntimeService()
	var errs []error
	cs, err := rs.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil {
		return err
	}
	for _, c := range cs.GetContainers() {
		if _, err := rs.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: c.Id, Timeout: 0}); err != nil {
			errs = append(errs, err)
		}
		if _, err := rs.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: c.Id}); err != nil {
			errs = append(errs, err)
		}
	}
	ss, err := rs.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	for _, s := range ss.GetItems() {
		if _, err := rs.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: s.Id}); err != nil {
			errs = append(errs, err)
		}
		if _, err := rs.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: s.Id}); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// killContainerd ends exactly the containerd this Runtime started or
// adopted, by pid.
func (r *Runtime) killContainerd(ctx context.Context) error {
	select {
	case <-r.exited:
		return nil
	default:
	}
	if err := syscall.Kill(r.pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("node: signal containerd %d: %w", r.pid, err)
	}
	grace := 10 * time.Second
	if d, ok := ctx.Deadline(); ok && time.Until(d) < grace {
		grace = max(time.Until(d), 100*time.Millisecond)
	}
	select {
	case <-r.exited:
		return nil
	case <-time.After(grace):
	}
	r.log.WarnContext(ctx, "containerd ignored SIGTERM; killing", "pid", r.pid)
	_ = syscall.Kill(r.pid, syscall.SIGKILL)
	select {
	case <-r.exited:
		return nil
	case <-time.After(5 * time.Second):
		return fmt.Errorf("node: containerd %d still running after SIGKILL", r.pid)
	}
}

// killLeftovers SIGKILLs the container processes recorded in this node's
// OCI runtime's root and the shims started for this node's socket. Both are
// found precisely (runc or crun state file with the process start time; shim command line
// naming this node's socket), so no other process is touched.
func (r *Runtime) killLeftovers(ctx context.Context) {
	type proc struct {
		pid   int
		start uint64
	}
	var killed []proc
	defer func() {
		// Wait (briefly) until they are gone, so that their cgroups can be
		// removed; a zombie no longer holds any.
		deadline := time.Now().Add(5 * time.Second)
		for _, p := range killed {
			for time.Now().Before(deadline) {
				if start, ok := procStart(p.pid); !ok || start != p.start || procZombie(p.pid) {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
	}()
	// runc keeps <root>/<namespace>/<id>/state.json, crun .../<id>/status;
	// both record the start time as /proc/<pid>/stat's field 22.
	runcStates, _ := filepath.Glob(filepath.Join(r.l.runcRoot, "*", "*", "state.json"))
	crunStates, _ := filepath.Glob(filepath.Join(r.l.runcRoot, "*", "*", "status"))
	for _, s := range append(runcStates, crunStates...) {
		b, err := os.ReadFile(s)
		if err != nil {
			continue
		}
		var st struct {
			Pid       int    `json:"init_process_pid"`
			Start     uint64 `json:"init_process_start"`
			CrunPid   int    `json:"pid"`
			CrunStart uint64 `json:"process-start-time"`
		}
		if json.Unmarshal(b, &st) != nil {
			continue
		}
		if st.Pid == 0 {
			st.Pid, st.Start = st.CrunPid, st.CrunStart
		}
		if st.Pid <= 0 {
			continue
		}
		if start, ok := procStart(st.Pid); ok && start == st.Start {
			r.log.WarnContext(ctx, "killing leftover container process", "pid", st.Pid, "state", s)
			_ = syscall.Kill(st.Pid, syscall.SIGKILL)
			killed = append(killed, proc{st.Pid, st.Start})
		}
	}
	for _, pid := range shimsOf(r.l.sock) {
		r.log.WarnContext(ctx, "killing leftover shim", "pid", pid)
		start, _ := procStart(pid)
		_ = syscall.Kill(pid, syscall.SIGKILL)
		killed = append(killed, proc{pid, start})
	}
}

// procStart is the start time of pid (procstat.Stat.StartTime).
func procStart(pid int) (uint64, bool) {
	st, err := procstat.Read(pid)
	return st.StartTime, err == nil
}

// procZombie reports whether pid has exited and waits to be reaped.
func procZombie(pid int) bool {
	st, err := procstat.Read(pid)
	return err == nil && st.Zombie()
}

// shimsOf lists the containerd-shim processes whose -address is sock.
func shimsOf(sock string) []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		if len(args) == 0 || !strings.HasPrefix(filepath.Base(args[0]), "containerd-shim") {
			continue
		}
		for i := 0; i+1 < len(args); i++ {
			if args[i] == "-address" && args[i+1] == sock {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}

// unmountUnder detaches every mount at or below dir, deepest first.
func unmountUnder(dir string) error {
	mounts, err := mount.Under(dir)
	if err != nil {
		return fmt.Errorf("node: %w", err)
	}
	var errs []error
	for _, mp := range mounts {
		if err := unix.Unmount(mp, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("node: unmount %s: %w", mp, err))
		}
	}
	return errors.Join(errs...)
}

// removeCgroups removes CgroupParent's subtree in every cgroup hierarchy;
// only empty cgroups can go, so a busy one is left and logged.
func (r *Runtime) removeCgroups() {
	roots, _ := filepath.Glob("/sys/fs/cgroup/*")
	roots = append(roots, "/sys/fs/cgroup")
	for _, root := range roots {
		top := filepath.Join(root, r.CgroupParent())
		if _, err := os.Stat(top); err != nil {
			continue
		}
		var dirs []string
		_ = filepath.WalkDir(top, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
		for _, d := range dirs {
			if err := os.Remove(d); err != nil {
				r.log.Warn("remove cgroup", "path", d, "err", err)
			}
		}
		// The shared /cairn parent stays: removing it could race with
		// another node's runc creating its cgroups below it.
	}
}
