package node

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cairn-dev/cairn/ops/images"
	"github.com/cairn-dev/cairn/services/netns"
	"github.com/cairn-dev/cairn/services/procstat"
)

// Runtime is a running private containerd of one node. Its methods are safe
// for concurrent use; Stop is idempotent.
type Runtime struct {
	cfg         Config
	l           layout
	log         *slog.Logger
	snapshotter string
	ociRuntime  string // the binary the runc shim runs: crun or runc

	netnsPath    string
	netnsCreated bool
	nsFD         int

	cmd     *exec.Cmd // nil when an already running containerd was adopted
	adopted bool
	timings Timings
	pid     int           // containerd's pid
	exited  chan struct{} // closed when containerd has exited
	waitErr error         // containerd's exit status, valid after exited

	conn *grpc.ClientConn

	stopOnce sync.Once
	stopErr  error
}

// Start writes the node's containerd and CNI configuration under cfg.Dir,
// starts `containerd --config Dir/containerd.toml` inside the network
// namespace cfg.NetNS, waits until its CRI reports RuntimeReady and
// NetworkReady, and imports cfg.Images into the k8s.io namespace (an image
// already present with the same digest is a no-op).
//
// If a containerd started earlier for the same Dir is still running (a
// process whose command line is containerd with this Dir's config: the pid
// in Dir/containerd.pid, else found in /proc), Start adopts it instead of
// starting another, so that containers outlive a restart of the process
// that owns the node; any second one it stops. On error nothing is left
// running, adopted or started: a clean stop during Start leaves nothing.
func Start(ctx context.Context, cfg Config, log *slog.Logger) (_ *Runtime, err error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	r := newRuntime(cfg, log)
	defer func() {
		if err == nil {
			return
		}
		// Adopted or started here, it is this node's: a start that fails
		// (or is cancelled, as by a clean stop) leaves nothing running.
		if serr := r.Stop(context.WithoutCancel(ctx)); serr != nil {
			r.log.Warn("stopping what a failed start left", "err", serr)
		}
	}()

	if err := os.MkdirAll(r.l.sockDir, 0o711); err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	r.netnsPath, r.netnsCreated, err = ensureNetNS(ctx, cfg.NetNS, cfg.CreateNetNS)
	if err != nil {
		return nil, err
	}
	// A namespace left by an earlier Start of this Dir (its owner crashed)
	// is still this node's to delete.
	if b, err := os.ReadFile(r.l.netnsMarker); err == nil && strings.TrimSpace(string(b)) == r.netnsPath {
		r.netnsCreated = true
	}
	if r.netnsCreated {
		if err := os.WriteFile(r.l.netnsMarker, []byte(r.netnsPath+"\n"), 0o644); err != nil {
			return nil, fmt.Errorf("node: %w", err)
		}
	}
	r.nsFD, err = unix.Open(r.netnsPath, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("node: open netns %s: %w", r.netnsPath, err)
	}

	r.snapshotter = cfg.Snapshotter
	if r.snapshotter == "" {
		r.snapshotter = "native"
		if overlayWorks(cfg.Dir) {
			r.snapshotter = "overlayfs"
		}
	}
	imgs := cfg.Images
	if imgs == nil {
		imgs, err = images.Build(ctx, r.l.imagesDir)
		if err != nil {
			return nil, fmt.Errorf("node: build images: %w", err)
		}
	}

	if r.adoptLeftover(ctx) {
		r.ociRuntime = configuredOCIRuntime(r.l.config)
	} else {
		var fallback string
		r.ociRuntime, fallback, err = chooseOCIRuntime(cfg.OCIRuntime)
		if err != nil {
			return nil, err
		}
		if fallback != "" {
			r.log.InfoContext(ctx, "using runc, not crun", "reason", fallback)
		}
		if !cfg.StateOnDisk {
			if err := mountStateTmpfs(r.l.state, r.l.runcRoot); err != nil {
				return nil, err
			}
		}
		if err := writeFiles(cfg, r.l, r.snapshotter, r.ociRuntime); err != nil {
			return nil, err
		}
		if err := r.startContainerd(ctx); err != nil {
			return nil, err
		}
	}
	if err := r.dial(); err != nil {
		return nil, err
	}
	launched := time.Now()
	if err := r.waitReady(ctx); err != nil {
		return nil, err
	}
	ready := time.Now()
	r.timings.Ready = ready.Sub(launched)
	if err := r.importImages(ctx, imgs); err != nil {
		return nil, err
	}
	r.timings.Import = time.Since(ready)
	return r, nil
}

// newRuntime is the Runtime of cfg (defaulted) before anything runs.
func newRuntime(cfg Config, log *slog.Logger) *Runtime {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &Runtime{cfg: cfg, l: newLayout(cfg.Dir), log: log.With("node_dir", cfg.Dir), nsFD: -1, exited: make(chan struct{})}
	if len(r.l.sock) > maxSocketPath {
		sum := sha256.Sum256([]byte(cfg.Dir))
		r.l.sockDir = filepath.Join("/run/cairn-node", hex.EncodeToString(sum[:6]))
		r.l.sock = filepath.Join(r.l.sockDir, "containerd.sock")
	}
	return r
}

// dial makes the gRPC connection to containerd's socket.
func (r *Runtime) dial() error {
	// A short reconnect back-off: the socket appears some ms after launch,
	// and grpc's default 1s first back-off would dominate start-up.
	conn, err := grpc.NewClient("unix://"+r.l.sock,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 10 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
			MinConnectTimeout: 5 * time.Second,
		}))
	if err != nil {
		return fmt.Errorf("node: cri client: %w", err)
	}
	r.conn = conn
	return nil
}

// adoptLeftover adopts the containerd an earlier owner of Dir left running,
// if there is one, and stops any other it finds (two can only run if a
// crash came between launching one and writing its pid: the second then
// waits for the first's metadata lock for ever). It reports whether it
// adopted one.
func (r *Runtime) adoptLeftover(ctx context.Context) bool {
	pids := r.leftovers()
	if len(pids) == 0 {
		return false
	}
	for _, pid := range pids[1:] {
		r.log.WarnContext(ctx, "stopping a second containerd of this node", "pid", pid)
		stopPid(pid, 5*time.Second)
	}
	r.log.InfoContext(ctx, "adopting running containerd", "pid", pids[0])
	r.pid = pids[0]
	r.adopted = true
	go r.watchAdopted()
	if err := writePidFile(r.l.pidFile, r.pid); err != nil {
		r.log.WarnContext(ctx, "write pid file", "err", err)
	}
	return true
}

// release closes the Runtime's connections without touching containerd.
func (r *Runtime) release() {
	if r.conn != nil {
		_ = r.conn.Close()
	}
	if r.nsFD >= 0 {
		_ = unix.Close(r.nsFD)
		r.nsFD = -1
	}
}

// startContainerd launches the daemon in the node's namespace.
func (r *Runtime) startContainerd(ctx context.Context) error {
	logf, err := os.OpenFile(r.l.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("node: %w", err)
	}
	defer logf.Close() // the child has its own copy
	_ = os.Remove(r.l.sock)
	cmd := exec.Command(r.cfg.Containerd, "--config", r.l.config)
	cmd.Dir = r.l.dir
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), "PATH="+withSbin(os.Getenv("PATH")), "TMPDIR="+r.l.temp)
	// Own process group: a ^C meant for the parent does not reach it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if r.cfg.KillWithParent {
		cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	}
	if err := startIn(r.nsFD, cmd); err != nil {
		return fmt.Errorf("node: start %s: %w", r.cfg.Containerd, err)
	}
	r.cmd, r.pid = cmd, cmd.Process.Pid
	if err := writePidFile(r.l.pidFile, r.pid); err != nil {
		r.log.WarnContext(ctx, "write pid file", "err", err)
	}
	go func() {
		r.waitErr = cmd.Wait()
		close(r.exited)
	}()
	r.log.InfoContext(ctx, "containerd started", "pid", r.pid, "netns", r.netnsPath, "socket", r.l.sock, "snapshotter", r.snapshotter, "oci_runtime", r.ociRuntime)
	return nil
}

// writePidFile replaces path with pid atomically: a crash never leaves it
// empty or half written.
func writePidFile(path string, pid int) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(strconv.Itoa(pid)), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// leftovers lists the live containerd processes of this node, left by an
// earlier Start for the same Dir: the processes whose command line is
// containerd with this node's config file (which nothing else names), the
// one in the pid file first, then the others oldest first.
func (r *Runtime) leftovers() []int {
	filed := 0
	if b, err := os.ReadFile(r.l.pidFile); err == nil {
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && r.isOurs(pid) {
			filed = pid
		}
	}
	type found struct {
		pid   int
		start uint64
	}
	var others []found
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == filed || !r.isOurs(pid) {
			continue
		}
		start, _ := procStart(pid)
		others = append(others, found{pid, start})
	}
	sort.Slice(others, func(i, j int) bool { return others[i].start < others[j].start })
	var pids []int
	if filed != 0 {
		pids = append(pids, filed)
	}
	for _, f := range others {
		pids = append(pids, f.pid)
	}
	return pids
}

// isOurs reports whether pid is a live containerd running this node's
// config.
func (r *Runtime) isOurs(pid int) bool {
	if pid <= 0 {
		return false
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
	if len(args) < 3 || filepath.Base(args[0]) != "containerd" || args[len(args)-2] != "--config" || args[len(args)-1] != r.l.config {
		return false
	}
	return procstat.Alive(pid)
}

// stopPid sends SIGTERM to pid and SIGKILL after grace, and waits until it
// is gone (or a zombie, for a parent that is not us to reap).
func stopPid(pid int, grace time.Duration) {
	start, ok := procStart(pid)
	if !ok {
		return
	}
	gone := func() bool {
		s, ok := procStart(pid)
		return !ok || s != start || procZombie(pid)
	}
	_ = syscall.Kill(pid, syscall.SIGTERM)
	for deadline := time.Now().Add(grace); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if gone() {
			return
		}
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline) && !gone(); time.Sleep(10 * time.Millisecond) {
	}
}

// watchAdopted closes r.exited when an adopted containerd (not our child)
// exits.
func (r *Runtime) watchAdopted() {
	fd, err := unix.PidfdOpen(r.pid, 0)
	if err != nil {
		close(r.exited)
		return
	}
	defer unix.Close(fd)
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		if _, err := unix.Poll(fds, -1); err == nil || !errors.Is(err, unix.EINTR) {
			break
		}
	}
	close(r.exited)
}

// waitReady polls the CRI Status until the runtime and network are ready.
func (r *Runtime) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.StartTimeout)
	defer cancel()
	rs := runtimeapi.NewRuntimeServiceClient(r.conn)
	var last error
	for {
		st, err := rs.Status(ctx, &runtimeapi.StatusRequest{})
		if err == nil {
			last = fmt.Errorf("not ready: %v", st.GetStatus().GetConditions())
			ready := 0
			for _, c := range st.GetStatus().GetConditions() {
				if (c.Type == runtimeapi.RuntimeReady || c.Type == runtimeapi.NetworkReady) && c.Status {
					ready++
				}
			}
			if ready == 2 {
				return nil
			}
		} else {
			last = err
			if status.Code(err) == codes.Unimplemented {
				// The socket serves but the CRI plugin failed to load.
				return fmt.Errorf("node: containerd runs without its CRI plugin: %s", r.logTail(20))
			}
		}
		select {
		case <-r.exited:
			return fmt.Errorf("node: containerd exited during start (%v): %s", r.waitErr, r.logTail(20))
		case <-ctx.Done():
			return fmt.Errorf("node: CRI not ready: %w (last: %v): %s", ctx.Err(), last, r.logTail(20))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// logTail returns the last n lines of containerd's log, for errors.
func (r *Runtime) logTail(n int) string {
	b, err := os.ReadFile(r.l.log)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func withSbin(path string) string {
	have := map[string]bool{}
	for _, p := range filepath.SplitList(path) {
		have[p] = true
	}
	for _, p := range []string{"/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"} {
		if !have[p] {
			if path != "" {
				path += ":"
			}
			path += p
		}
	}
	return path
}

// overlayWorks tries an overlay mount under dir: overlay may be missing, or
// dir may itself be on overlayfs.
func overlayWorks(dir string) bool {
	base := filepath.Join(dir, ".overlay-check")
	defer os.RemoveAll(base)
	var paths []string
	for _, d := range []string{"lower", "upper", "work", "merged"} {
		p := filepath.Join(base, d)
		if err := os.MkdirAll(p, 0o700); err != nil {
			return false
		}
		paths = append(paths, p)
	}
	opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s", paths[0], paths[1], paths[2])
	if err := unix.Mount("overlay", paths[3], "overlay", 0, opts); err != nil {
		return false
	}
	_ = unix.Unmount(paths[3], unix.MNT_DETACH)
	return true
}

// Endpoint is the CRI endpoint, "unix:///.../containerd.sock", for
// kubelet-style --container-runtime-endpoint flags and grpc.NewClient.
func (r *Runtime) Endpoint() string { return "unix://" + r.l.sock }

// Socket is the path of containerd's gRPC socket (CRI and containerd API).
func (r *Runtime) Socket() string { return r.l.sock }

// Run blocks until ctx is done and then stops the node (see Stop), or
// returns an error (after cleaning up) if containerd exits on its own
// first. It lets a Runtime from Start run under a Run(ctx) supervisor.
func (r *Runtime) Run(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return r.Stop(context.WithoutCancel(ctx))
	case <-r.exited:
		err := fmt.Errorf("node: containerd %d exited (%v): %s", r.pid, r.waitErr, r.logTail(10))
		return errors.Join(err, r.Stop(context.WithoutCancel(ctx)))
	}
}

// Adopted reports whether Start found this node's containerd already
// running (left by an earlier owner of Dir) instead of starting it.
func (r *Runtime) Adopted() bool { return r.adopted }

// Timings are the phases of Start.
type Timings struct {
	// Ready is from launching containerd (or adopting it) to its CRI
	// reporting RuntimeReady and NetworkReady.
	Ready time.Duration
	// Import is the image import and unpack after that.
	Import time.Duration
}

// Timings reports how long the phases of Start took.
func (r *Runtime) Timings() Timings { return r.timings }

// Pid is containerd's process id.
func (r *Runtime) Pid() int { return r.pid }

// NetNSPath is the node's network namespace, e.g. /run/netns/cairn-n1.
func (r *Runtime) NetNSPath() string { return r.netnsPath }

// PodCIDR is the subnet pods get their IPs from.
func (r *Runtime) PodCIDR() string { return r.cfg.PodCIDR }

// Gateway is the bridge's address inside the node namespace: the node's
// address as seen by its pods (a sensible status.hostIP).
func (r *Runtime) Gateway() net.IP { return gateway(r.cfg.PodCIDR) }

// Snapshotter is the snapshotter in use, "overlayfs" or "native".
func (r *Runtime) Snapshotter() string { return r.snapshotter }

// OCIRuntime is the path of the OCI runtime containers are created with
// (crun or runc, see Config.OCIRuntime).
func (r *Runtime) OCIRuntime() string { return r.ociRuntime }

// Dir is the node's directory.
func (r *Runtime) Dir() string { return r.l.dir }

// LogPath is containerd's own log file.
func (r *Runtime) LogPath() string { return r.l.log }

// Exited is closed when containerd has exited (crashed or stopped).
func (r *Runtime) Exited() <-chan struct{} { return r.exited }

// Conn is a gRPC connection to containerd's socket, shared by the CRI
// clients below; Stop closes it.
func (r *Runtime) Conn() *grpc.ClientConn { return r.conn }

// RuntimeService is a CRI runtime client over Conn.
func (r *Runtime) RuntimeService() runtimeapi.RuntimeServiceClient {
	return runtimeapi.NewRuntimeServiceClient(r.conn)
}

// ImageService is a CRI image client over Conn.
func (r *Runtime) ImageService() runtimeapi.ImageServiceClient {
	return runtimeapi.NewImageServiceClient(r.conn)
}

// DialContext dials from inside the node's network namespace (pod IPs,
// hostPorts, the CRI streaming server on the namespace's 127.0.0.1). It fits
// net.Dialer.DialContext, http.Transport.DialContext and grpc.WithContextDialer
// (after a network is fixed).
func (r *Runtime) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	return dialIn(ctx, r.nsFD, network, addr)
}

// Listen listens inside the node's network namespace, e.g. a test registry
// on the namespace's 127.0.0.1 that containerd can pull from.
func (r *Runtime) Listen(ctx context.Context, network, addr string) (net.Listener, error) {
	return listenIn(ctx, r.nsFD, network, addr)
}

// Do runs fn on a thread inside the node's network namespace. Keep fn
// short and do not start goroutines in it that need the namespace.
func (r *Runtime) Do(fn func() error) error { return netns.DoFD(r.nsFD, fn) }

// AddRegistry makes containerd reach the registry host ("127.0.0.1:5000")
// over plain http (hosts.toml under Dir/certs.d). It takes effect at the
// next pull, without a restart.
func (r *Runtime) AddRegistry(host string) error {
	d := filepath.Join(r.l.hostsDir, host)
	if err := os.MkdirAll(d, 0o755); err != nil {
		return fmt.Errorf("node: %w", err)
	}
	if err := os.WriteFile(filepath.Join(d, "hosts.toml"), []byte(hostsTOML(host)), 0o644); err != nil {
		return fmt.Errorf("node: %w", err)
	}
	return nil
}
