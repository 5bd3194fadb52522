package historytest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

const (
	upTimeout   = 60 * time.Second // cairn up to print that the history is ready
	callTimeout = 60 * time.Second // one cairn or kubectl command
)

// up is one `cairn up` child process. Its stdout and stderr go to files.
type up struct {
	dir, addr  string
	cmd        *exec.Cmd
	outs, errs string // the files
	exited     chan struct{}
	waitErr    error
}

// startUp runs `cairn up` on dir and addr without a node and waits until it
// prints that the history is ready and serves /readyz. The process is
// killed at cleanup if the test has not stopped it.
func startUp(t *testing.T, bin, dir, addr string) *up {
	t.Helper()
	logs := t.TempDir()
	u := &up{dir: dir, addr: addr, outs: filepath.Join(logs, "stdout"), errs: filepath.Join(logs, "stderr"), exited: make(chan struct{})}
	u.cmd = exec.Command(bin, "up", "--data-dir", dir, "--listen", addr, "--node=false")
	for _, f := range []struct {
		path string
		to   *io.Writer
	}{{u.outs, &u.cmd.Stdout}, {u.errs, &u.cmd.Stderr}} {
		file, err := os.Create(f.path)
		if err != nil {
			t.Fatal(err)
		}
		defer file.Close() // the child has its own descriptor
		*f.to = file
	}
	if err := u.cmd.Start(); err != nil {
		t.Fatalf("start cairn up: %v", err)
	}
	go func() {
		u.waitErr = u.cmd.Wait()
		close(u.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-u.exited:
		default:
			_ = u.cmd.Process.Kill()
			<-u.exited
		}
	})
	for deadline := time.Now().Add(upTimeout); ; time.Sleep(200 * time.Millisecond) {
		select {
		case <-u.exited:
			t.Fatalf("cairn up on %s exited: %v\n%s", dir, u.waitErr, u.output())
		default:
		}
		if out, _ := os.ReadFile(u.outs); strings.Contains(string(out), "history ready") && u.ready(t) {
			return u
		}
		if time.Now().After(deadline) {
			t.Fatalf("cairn up on %s not ready after %s\n%s", dir, upTimeout, u.output())
		}
	}
}

// output is the end of what the child printed.
func (u *up) output() string {
	out, _ := os.ReadFile(u.outs)
	errs, _ := os.ReadFile(u.errs)
	return "stdout:\n" + tail(string(out), 2000) + "\nstderr:\n" + tail(string(errs), 4000)
}

func (u *up) kubeconfig() string { return filepath.Join(u.dir, "kubeconfig") }

func (u *up) ready(t *testing.T) bool {
	cs, err := clientFor(u.kubeconfig())
	if err != nil {
		return false
	}
	b, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(t.Context())
	return err == nil && string(b) == "ok"
}

// stop sends sig and waits for the process to end: after SIGTERM it must
// exit 0, after SIGKILL it has been killed.
func (u *up) stop(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := u.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal cairn up: %v", err)
	}
	select {
	case <-u.exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("cairn up did not exit within 30s of %v\n%s", sig, u.output())
	}
	var exit *exec.ExitError
	switch {
	case sig == syscall.SIGTERM && u.waitErr != nil:
		t.Fatalf("cairn up exited with %v after SIGTERM, want 0\n%s", u.waitErr, u.output())
	case sig == syscall.SIGKILL && !(errors.As(u.waitErr, &exit) && exit.Sys().(syscall.WaitStatus).Signal() == syscall.SIGKILL):
		t.Fatalf("cairn up ended with %v, want killed by SIGKILL", u.waitErr)
	}
}

func clientFor(kubeconfig string) (*kubernetes.Clientset, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}

// run runs a program to completion and returns its stdout, or an error
// with its output.
func run(t *testing.T, env []string, stdin string, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%s %s: %w\nstdout:\n%s\nstderr:\n%s", name, strings.Join(args, " "), err,
			tail(stdout.String(), 4000), tail(stderr.String(), 4000))
	}
	return stdout.String(), nil
}

// command is run, failing the test if the program fails.
func command(t *testing.T, env []string, stdin string, name string, args ...string) string {
	t.Helper()
	out, err := run(t, env, stdin, name, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// kubectl runs the real kubectl against u with the kubeconfig cairn wrote
// and a private HOME (no discovery cache of other runs).
func (u *up) kubectl(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	return command(t, []string{"KUBECONFIG=" + u.kubeconfig(), "HOME=" + filepath.Join(u.dir, "home")}, stdin, kubectlPath(t), args...)
}

// cairn runs a cairn command against u's data directory.
func (u *up) cairn(t *testing.T, bin string, args ...string) string {
	t.Helper()
	return command(t, nil, "", bin, append(args, "--data-dir", u.dir)...)
}

// kubectlPath is the machine's kubectl; the test is skipped without one.
func kubectlPath(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"/usr/bin/kubectl", "kubectl"} {
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	t.Skip("kubectl not installed")
	return ""
}

// tail is the end of s, for failure messages.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return fmt.Sprintf("...%s", s[len(s)-n:])
}
