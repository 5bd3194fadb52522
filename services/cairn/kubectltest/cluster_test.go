package kubectltest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/cairn-dev/cairn/services/cairn/cairntest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const (
	readyTimeout = 45 * time.Second
	stopTimeout  = 20 * time.Second
	callTimeout  = 30 * time.Second
)

// kubectlPath returns the kubectl to drive, or skips the test.
func kubectlPath(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat("/usr/bin/kubectl"); err == nil {
		return "/usr/bin/kubectl"
	}
	p, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl not installed")
	}
	return p
}

// cluster is one running `cairn up` child process and the kubectl that
// talks to it.
type cluster struct {
	bin, kubectl   string
	dataDir, addr  string
	home           string
	cmd            *exec.Cmd
	stdout, stderr *cairntest.Buffer
	done           chan struct{}
	waitErr        error
	stopped        bool
	kubeconfig     string
}

// startCluster runs `cairn up` and waits until the apiserver is ready. The
// process is killed at owner's cleanup if the test did not stop it; owner is
// t or a parent of t, so a subtest can start a cluster that outlives it.
func startCluster(t, owner *testing.T, bin, kubectl, dataDir, addr, home string) *cluster {
	t.Helper()
	c := &cluster{
		bin: bin, kubectl: kubectl, dataDir: dataDir, addr: addr, home: home,
		stdout: &cairntest.Buffer{}, stderr: &cairntest.Buffer{}, done: make(chan struct{}),
		kubeconfig: filepath.Join(dataDir, "kubeconfig"),
	}
	c.cmd = exec.Command(bin, "up", "--data-dir", dataDir, "--listen", addr, "--node=false")
	c.cmd.Stdout, c.cmd.Stderr = c.stdout, c.stderr
	if err := c.cmd.Start(); err != nil {
		t.Fatalf("start cairn up: %v", err)
	}
	go func() {
		c.waitErr = c.cmd.Wait()
		close(c.done)
	}()
	owner.Cleanup(func() {
		if !c.stopped {
			_ = c.cmd.Process.Kill()
			<-c.done
		}
	})
	c.waitReady(t)
	return c
}

func (c *cluster) waitReady(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(readyTimeout)
	var last string
	for time.Now().Before(deadline) {
		select {
		case <-c.done:
			t.Fatalf("cairn up exited before ready: %v\nstdout:\n%s\nstderr:\n%s", c.waitErr, c.stdout, c.stderr)
		default:
		}
		if _, err := os.Stat(c.kubeconfig); err == nil {
			r := c.run(t, "get", "--raw", "/readyz")
			if r.err == nil && strings.TrimSpace(r.stdout) == "ok" {
				return
			}
			last = r.String()
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("cairn up not ready after %v; last readyz: %s\nstdout:\n%s\nstderr:\n%s", readyTimeout, last, c.stdout, c.stderr)
}

// stop sends SIGINT and requires a clean exit (code 0) within stopTimeout.
func (c *cluster) stop(t *testing.T) {
	t.Helper()
	if c.stopped {
		return
	}
	c.stopped = true
	if err := c.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatalf("signal cairn up: %v", err)
	}
	select {
	case <-c.done:
	case <-time.After(stopTimeout):
		_ = c.cmd.Process.Kill()
		<-c.done
		t.Fatalf("cairn up did not exit within %v of SIGINT\nstderr:\n%s", stopTimeout, c.stderr)
	}
	if c.waitErr != nil {
		t.Fatalf("cairn up exited with %v (want exit code 0)\nstderr:\n%s", c.waitErr, c.stderr)
	}
}

// result is the outcome of one kubectl call.
type result struct {
	args           []string
	stdout, stderr string
	err            error
}

func (r result) String() string {
	return fmt.Sprintf("kubectl %s: err=%v\nstdout:\n%s\nstderr:\n%s", strings.Join(r.args, " "), r.err, r.stdout, r.stderr)
}

// env is the environment kubectl runs with: our kubeconfig and a private
// HOME so the discovery cache of other runs cannot interfere.
func (c *cluster) env() []string {
	env := []string{"KUBECONFIG=" + c.kubeconfig, "HOME=" + c.home}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "KUBECONFIG=") && !strings.HasPrefix(kv, "HOME=") {
			env = append(env, kv)
		}
	}
	return env
}

// run runs kubectl and returns whatever happened.
func (c *cluster) run(t *testing.T, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.kubectl, args...)
	cmd.Env = c.env()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return result{args: args, stdout: stdout.String(), stderr: stderr.String(), err: err}
}

// ok runs kubectl, fails the test unless it exits 0, and returns stdout.
func (c *cluster) ok(t *testing.T, args ...string) string {
	t.Helper()
	r := c.run(t, args...)
	if r.err != nil {
		t.Fatalf("%s", r)
	}
	return r.stdout
}

// fails runs kubectl, fails the test if it exits 0, and returns stderr.
func (c *cluster) fails(t *testing.T, args ...string) string {
	t.Helper()
	r := c.run(t, args...)
	var exit *exec.ExitError
	if !errors.As(r.err, &exit) {
		t.Fatalf("want kubectl to exit non-zero; %s", r)
	}
	return r.stderr
}

// background starts kubectl and returns its live stdout and a stop func
// that ends it and waits for it.
func (c *cluster) background(t *testing.T, args ...string) (*cairntest.Buffer, func()) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	cmd := exec.CommandContext(ctx, c.kubectl, args...)
	cmd.Env = c.env()
	out, errOut := &cairntest.Buffer{}, &cairntest.Buffer{}
	cmd.Stdout, cmd.Stderr = out, errOut
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("start kubectl %v: %v", args, err)
	}
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			_ = cmd.Wait()
			if s := errOut.String(); s != "" {
				t.Logf("kubectl %s stderr: %s", strings.Join(args, " "), s)
			}
		})
	}
	t.Cleanup(stop)
	return out, stop
}
