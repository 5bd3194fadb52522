package cairntest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// KubectlPath returns the kubectl to drive: /usr/bin/kubectl if there is
// one, else the one on PATH. It skips t when there is none.
func KubectlPath(t testing.TB) string {
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

// Kubectl runs the real kubectl against a cluster. Its methods may be
// called from any test or subtest.
type Kubectl struct {
	Path       string        // from KubectlPath
	Kubeconfig string        // KUBECONFIG
	Home       string        // a private HOME: no discovery cache of other runs
	Timeout    time.Duration // bounds one call
}

// Command is kubectl with args, the kubeconfig and the private HOME, for
// callers that stream (logs -f, get -w). ctx ends it.
func (k *Kubectl) Command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, k.Path, args...)
	env := []string{"KUBECONFIG=" + k.Kubeconfig, "HOME=" + k.Home}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "KUBECONFIG=") && !strings.HasPrefix(kv, "HOME=") {
			env = append(env, kv)
		}
	}
	cmd.Env = env
	return cmd
}

// Run runs kubectl with args to completion and returns what happened; it
// is killed after k.Timeout or when t ends.
func (k *Kubectl) Run(t testing.TB, args ...string) Result {
	t.Helper()
	return k.RunWith(t, "", k.Timeout, args...)
}

// RunWith is Run with stdin (for -f -) and its own timeout, for calls that
// wait longer (rollout status); a zero timeout is k.Timeout.
func (k *Kubectl) RunWith(t testing.TB, stdin string, timeout time.Duration, args ...string) Result {
	t.Helper()
	if timeout == 0 {
		timeout = k.Timeout
	}
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	cmd := k.Command(ctx, args...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	return run(cmd, "kubectl", args)
}

// OK runs kubectl, fails t unless it exits 0, and returns stdout.
func (k *Kubectl) OK(t testing.TB, args ...string) string {
	t.Helper()
	r := k.Run(t, args...)
	if r.Err != nil {
		t.Fatalf("%s", r)
	}
	return r.Stdout
}

// Fails runs kubectl, fails t unless it exits non-zero, and returns
// stderr.
func (k *Kubectl) Fails(t testing.TB, args ...string) string {
	t.Helper()
	r := k.Run(t, args...)
	var exit *exec.ExitError
	if !errors.As(r.Err, &exit) {
		t.Fatalf("want kubectl to exit non-zero; %s", r)
	}
	return r.Stderr
}

// Background starts kubectl and returns its live stdout and a stop func
// that ends it and waits for it (also called at t's cleanup). It is killed
// after k.Timeout; its stderr is logged when it ends.
func (k *Kubectl) Background(t testing.TB, args ...string) (*Buffer, func()) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), k.Timeout)
	cmd := k.Command(ctx, args...)
	out, errOut := &Buffer{}, &Buffer{}
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

// Result is the outcome of one command.
type Result struct {
	Name           string // the program's base name
	Args           []string
	Stdout, Stderr string
	Err            error // nil for exit code 0
}

func (r Result) String() string {
	return fmt.Sprintf("%s %s: err=%v\nstdout:\n%s\nstderr:\n%s", r.Name, strings.Join(r.Args, " "), r.Err, r.Stdout, r.Stderr)
}

// Run runs the program name with args to completion and returns what
// happened; it is killed after timeout or when t ends.
func Run(t testing.TB, timeout time.Duration, name string, args ...string) Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	return run(exec.CommandContext(ctx, name, args...), filepath.Base(name), args)
}

// RunIn is Run in the working directory dir, with env (NAME=value) in
// place of the same variables of the test's environment; an entry "NAME="
// with no value removes NAME.
func RunIn(t testing.TB, timeout time.Duration, dir string, env []string, name string, args ...string) Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	replaced := map[string]bool{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		replaced[k] = true
		if v != "" {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); !replaced[k] {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	return run(cmd, filepath.Base(name), args)
}

func run(cmd *exec.Cmd, name string, args []string) Result {
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return Result{Name: name, Args: args, Stdout: stdout.String(), Stderr: stderr.String(), Err: err}
}
