package cairntest

import (
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

// Proc runs one kind of child (an apiserver, one controller-manager
// replica, ...) as processes one after another, each logging to its own
// file in a temporary directory. Its methods fail the test on errors; they
// are for the test's goroutine.
type Proc struct {
	t      testing.TB
	name   string
	bin    string
	args   []string
	logDir string

	n       int
	c       *child // the running child, nil when none runs
	logPath string
}

// NewProc returns a Proc that runs bin with args; nothing runs until Start.
// The running child is killed when the test ends.
func NewProc(t testing.TB, name, bin string, args ...string) *Proc {
	t.Helper()
	p := &Proc{t: t, name: name, bin: bin, args: args, logDir: t.TempDir()}
	t.Cleanup(p.Stop)
	return p
}

// Start starts the next child, its output going to <name>-NN.log.
func (p *Proc) Start() {
	p.t.Helper()
	p.logPath = filepath.Join(p.logDir, fmt.Sprintf("%s-%02d.log", strings.ReplaceAll(p.name, " ", "-"), p.n))
	p.n++
	f, err := os.Create(p.logPath)
	if err != nil {
		p.t.Fatal(err)
	}
	defer f.Close() // the child has its own descriptor
	cmd := exec.Command(p.bin, p.args...)
	cmd.Stdout, cmd.Stderr = f, f
	if p.c, err = startChild(cmd); err != nil {
		p.t.Fatalf("start %s: %v", p.name, err)
	}
}

// WaitHTTPReady waits up to 30 s until the child answers GET url with 200.
func (p *Proc) WaitHTTPReady(url string) {
	p.t.Helper()
	hc := &http.Client{Timeout: time.Second}
	defer hc.CloseIdleConnections()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if p.c.exited() {
			p.t.Fatalf("%s (child %d) exited before it was ready:\n%s", p.name, p.n-1, p.Output())
		}
		resp, err := hc.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("%s (child %d) not ready after 30s (last error %v):\n%s", p.name, p.n-1, err, p.Output())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Alive fails the test if the running child has exited.
func (p *Proc) Alive() {
	p.t.Helper()
	if p.c != nil && p.c.exited() {
		p.t.Fatalf("%s (child %d) died on its own (%v):\n%s", p.name, p.n-1, p.c.cmd.ProcessState, p.Output())
	}
}

// Kill sends SIGKILL to the running child, which must be alive, reaps it
// and checks that it had not crashed before.
func (p *Proc) Kill() {
	p.t.Helper()
	p.Alive()
	if err := p.c.signal(syscall.SIGKILL); err != nil {
		p.t.Fatalf("kill %s: %v", p.name, err)
	}
	<-p.c.done
	p.Crashed()
	p.c = nil
}

// Interrupt sends SIGINT and waits for a clean exit.
func (p *Proc) Interrupt(timeout time.Duration) {
	p.t.Helper()
	p.Alive()
	if err := p.c.cmd.Process.Signal(syscall.SIGINT); err != nil {
		p.t.Fatalf("interrupt %s: %v", p.name, err)
	}
	if !p.c.wait(timeout) {
		p.t.Fatalf("%s did not exit within %v of SIGINT:\n%s", p.name, timeout, p.Output())
	}
	p.Crashed()
	if !p.c.cmd.ProcessState.Success() {
		p.t.Errorf("%s exited with %v after SIGINT:\n%s", p.name, p.c.cmd.ProcessState, p.Output())
	}
	p.c = nil
}

// Crashed fails the test if the current child's output shows a panic, a
// fatal runtime error or a data race.
func (p *Proc) Crashed() {
	p.t.Helper()
	if out := p.Output(); strings.Contains(out, "panic:") || strings.Contains(out, "fatal error:") || strings.Contains(out, "DATA RACE") {
		p.t.Errorf("%s (child %d) crashed:\n%s", p.name, p.n-1, out)
	}
}

// Stop kills the running child, if any, and logs its output if the test
// failed. NewProc registers it as a cleanup.
func (p *Proc) Stop() {
	if p.c == nil {
		return
	}
	p.c.kill()
	if p.t.Failed() {
		p.t.Logf("last %s child (%d):\n%s", p.name, p.n-1, p.Output())
	}
	p.c = nil
}

// Output is the current child's output, the last 8 KiB of it.
func (p *Proc) Output() string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return fmt.Sprintf("(no output: %v)", err)
	}
	if len(b) > 8<<10 {
		b = b[len(b)-8<<10:]
	}
	return string(b)
}
