package cairntest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// UpConfig is what StartUp runs: `Bin up --data-dir DataDir --listen Addr
// Args...`.
type UpConfig struct {
	Bin, DataDir, Addr string
	Args               []string // more flags, such as --node=false
	// Dir is the child's working directory; empty is the test's. With
	// DataDir empty, --data-dir is not passed: cairn up uses its default,
	// Dir/.cairn, and DataDir is set to that.
	Dir string
	// Env is the child's whole environment; nil inherits the test's.
	Env []string
	// Prefix, when set, is a command that execs Bin with its arguments
	// (such as ip netns exec NS, to run the server on a test host of
	// ops/topologies): the child's pid stays Bin's.
	Prefix []string
	// StopTimeout bounds Stop after SIGINT or SIGTERM (or SIGKILL), and how
	// long the cleanup waits after its SIGINT before it kills.
	StopTimeout time.Duration
	// ClusterDNS deploys the cluster DNS, as cairn up does by default;
	// false passes --disable-cluster-dns, so that a test sees only the
	// pods, Deployments and Services it makes, and a loaded machine runs
	// no CoreDNS it does not need.
	ClusterDNS bool
}

// Up is one `cairn up` child process, its stdout and stderr kept in
// memory for failure messages. Its methods are for the test's goroutine.
type Up struct {
	UpConfig
	stdout, stderr *Buffer
	c              *child
	stopped        bool
}

// StartUp starts `cairn up` as cfg says; it does not wait for it (see
// WaitReady). If the test has not stopped it by owner's cleanup, the
// cleanup sends SIGINT, so that a node cleans up, kills it after
// cfg.StopTimeout, and logs its output if owner failed. owner is t or a
// parent of t, so that a subtest can start a `cairn up` that outlives it.
func StartUp(t, owner testing.TB, cfg UpConfig) *Up {
	t.Helper()
	args := []string{"up", "--data-dir", cfg.DataDir, "--listen", cfg.Addr}
	if cfg.DataDir == "" {
		if cfg.Dir == "" {
			t.Fatal("cairntest: UpConfig needs DataDir or Dir")
		}
		cfg.DataDir = filepath.Join(cfg.Dir, ".cairn")
		args = []string{"up", "--listen", cfg.Addr}
	}
	if !cfg.ClusterDNS {
		args = append(args, "--disable-cluster-dns")
	}
	u := &Up{UpConfig: cfg, stdout: &Buffer{}, stderr: &Buffer{}}
	argv := append(append(append([]string{}, cfg.Prefix...), cfg.Bin), append(args, cfg.Args...)...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir, cmd.Env = cfg.Dir, cfg.Env
	cmd.Stdout, cmd.Stderr = u.stdout, u.stderr
	var err error
	if u.c, err = startChild(cmd); err != nil {
		t.Fatalf("start %s: %v", u, err)
	}
	owner.Cleanup(func() {
		u.c.stop(cfg.StopTimeout)
		if owner.Failed() {
			owner.Logf("%s (%v):\n%s", u, u.c.cmd.ProcessState, u.Output())
		}
	})
	return u
}

// String names the child in messages.
func (u *Up) String() string { return "cairn up on " + u.DataDir }

// Kubeconfig is the admin kubeconfig `cairn up` writes into its data
// directory.
func (u *Up) Kubeconfig() string { return filepath.Join(u.DataDir, "kubeconfig") }

// WaitReady polls ready until it returns nil, calling it only once the
// kubeconfig exists. It fails t as soon as the child exits, or with ready's
// last error after timeout.
func (u *Up) WaitReady(t testing.TB, timeout time.Duration, ready func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if u.c.exited() {
			t.Fatalf("%s exited before it was ready: %v\n%s", u, u.c.err, u.Output())
		}
		err := errors.New("no kubeconfig yet")
		if _, serr := os.Stat(u.Kubeconfig()); serr == nil {
			if err = ready(); err == nil {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not ready after %v; last: %v\n%s", u, timeout, err, u.Output())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Stop sends sig and waits up to StopTimeout for the child to end (it is
// killed if it does not). After SIGKILL it must have died of it; after any
// other signal (SIGINT, SIGTERM) it must have exited with code 0. Stop
// after Stop does nothing.
func (u *Up) Stop(t testing.TB, sig syscall.Signal) {
	t.Helper()
	if u.stopped {
		return
	}
	u.stopped = true
	if u.c.exited() {
		t.Fatalf("%s had exited before %v: %v\n%s", u, sig, u.c.err, u.Output())
	}
	if err := u.c.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %s: %v", u, err)
	}
	if !u.c.wait(u.StopTimeout) {
		u.c.kill()
		t.Fatalf("%s did not exit within %v of %v\n%s", u, u.StopTimeout, sig, u.Output())
	}
	switch {
	case sig == syscall.SIGKILL && !u.c.killedBy(syscall.SIGKILL):
		t.Fatalf("%s ended with %v, want killed by SIGKILL\n%s", u, u.c.err, u.Output())
	case sig != syscall.SIGKILL && u.c.err != nil:
		t.Fatalf("%s exited with %v after %v, want exit code 0\n%s", u, u.c.err, sig, u.Output())
	}
}

// Stdout is everything the child has written to stdout so far.
func (u *Up) Stdout() string { return u.stdout.String() }

// Stderr is everything the child has written to stderr so far.
func (u *Up) Stderr() string { return u.stderr.String() }

// Pid is the child's process id.
func (u *Up) Pid() int { return u.c.cmd.Process.Pid }

// Log is the path of the child's structured log, <data-dir>/cairn.log.
func (u *Up) Log() string { return filepath.Join(u.DataDir, "cairn.log") }

// Output is the end of the child's stdout, stderr and cairn.log, for
// failure messages: the last 80 lines of each.
func (u *Up) Output() string {
	log, err := os.ReadFile(u.Log())
	if err != nil {
		log = []byte(err.Error())
	}
	return fmt.Sprintf("stdout:\n%s\nstderr:\n%s\ncairn.log:\n%s", Tail(u.stdout.String(), 80), Tail(u.stderr.String(), 80), Tail(string(log), 80))
}
