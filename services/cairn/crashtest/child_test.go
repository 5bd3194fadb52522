package crashtest

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The user the apiserver authenticates the load as; every acknowledged
// write's event must name it.
const (
	adminToken = "crash-admin-token"
	adminUser  = "admin"
	adminGroup = "system:masters"
)

// apiserverProc runs `cairn apiserver` processes one after another.
type apiserverProc struct {
	t       *testing.T
	bin     string
	args    []string
	addr    string
	logDir  string
	n       int
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
}

func newAPIServerProc(t *testing.T, bin, etcdURL, natsURL, addr string) *apiserverProc {
	t.Helper()
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens.csv")
	line := fmt.Sprintf("%s,%s,%s-uid,%q\n", adminToken, adminUser, adminUser, adminGroup)
	if err := os.WriteFile(tokens, []byte(line), 0o600); err != nil {
		t.Fatal(err)
	}
	p := &apiserverProc{t: t, bin: bin, addr: addr, logDir: dir, args: []string{"apiserver",
		"--etcd-endpoints", etcdURL, "--nats-url", natsURL, "--listen", addr,
		"--insecure-http", "--token-auth-file", tokens, "--election-ttl", "2s", "--log-level", "warn"}}
	t.Cleanup(p.stop)
	return p
}

// start starts the next child, its output going to child-NN.log.
func (p *apiserverProc) start() {
	p.t.Helper()
	p.logPath = filepath.Join(p.logDir, fmt.Sprintf("child-%02d.log", p.n))
	p.n++
	f, err := os.Create(p.logPath)
	if err != nil {
		p.t.Fatal(err)
	}
	cmd := exec.Command(p.bin, p.args...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		p.t.Fatalf("start cairn apiserver: %v", err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		f.Close()
		close(done)
	}()
	p.cmd, p.done = cmd, done
}

// waitReady waits until the child answers /readyz with 200.
func (p *apiserverProc) waitReady() {
	p.t.Helper()
	hc := &http.Client{Timeout: time.Second}
	defer hc.CloseIdleConnections()
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-p.done:
			p.t.Fatalf("cairn apiserver child %d exited before it was ready:\n%s", p.n-1, p.output())
		default:
		}
		resp, err := hc.Get("http://" + p.addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("cairn apiserver child %d not ready after 30s (last error %v):\n%s", p.n-1, err, p.output())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// kill sends SIGKILL to the running child and reaps it. It fails the test if
// the child had died on its own or panicked before.
func (p *apiserverProc) kill() {
	p.t.Helper()
	select {
	case <-p.done:
		p.t.Fatalf("cairn apiserver child %d died before it was killed (%v):\n%s", p.n-1, p.cmd.ProcessState, p.output())
	default:
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		p.t.Fatalf("kill: %v", err)
	}
	<-p.done
	if out := p.output(); strings.Contains(out, "panic:") || strings.Contains(out, "fatal error:") {
		p.t.Fatalf("cairn apiserver child %d crashed on its own:\n%s", p.n-1, out)
	}
	p.cmd = nil
}

// stop kills the running child, if any (cleanup).
func (p *apiserverProc) stop() {
	if p.cmd == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
	if p.t.Failed() {
		p.t.Logf("last cairn apiserver child (%d):\n%s", p.n-1, p.output())
	}
	p.cmd = nil
}

// output is the current child's output, the last 8 KiB of it.
func (p *apiserverProc) output() string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return fmt.Sprintf("(no output: %v)", err)
	}
	if len(b) > 8<<10 {
		b = b[len(b)-8<<10:]
	}
	return string(b)
}
