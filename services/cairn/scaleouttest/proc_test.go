package scaleouttest

import (
	"errors"
	"fmt"
	"io"
	stdlog "log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// The identities the apiserver knows: the test's admin (the user and the
// kubelet) and the controller manager, whose writes the log must name.
const (
	adminToken     = "admin-token"
	controllerUser = "system:kube-controller-manager"
	controllerTok  = "cm-token"
)

// writeTokens writes the apiserver's token file.
func writeTokens(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "tokens.csv")
	lines := fmt.Sprintf("%s,admin,1,%q\n%s,%s,2,\"\"\n", adminToken, "system:masters", controllerTok, controllerUser)
	if err := os.WriteFile(path, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// tokenProxy serves a loopback proxy to the apiserver at addr that adds
// the bearer token to every request and returns its address: client-go
// applies a kubeconfig's credentials only over TLS, and the children talk
// plain HTTP to the apiserver.
func tokenProxy(t *testing.T, addr, token string) string {
	t.Helper()
	rp := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: addr})
	rp.FlushInterval = -1 // watches
	rp.ErrorLog = stdlog.New(io.Discard, "", 0)
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		r.Header.Set("Authorization", "Bearer "+token)
		rp.ServeHTTP(rw, r)
	}))
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

// writeKubeconfig writes a kubeconfig that reaches the apiserver at addr
// over plain HTTP with a bearer token (which client-go does not send over
// plain HTTP; see tokenProxy).
func writeKubeconfig(t *testing.T, dir, addr, token string) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["cairn"] = &clientcmdapi.Cluster{Server: "http://" + addr}
	cfg.AuthInfos["cm"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["cairn"] = &clientcmdapi.Context{Cluster: "cairn", AuthInfo: "cm"}
	cfg.CurrentContext = "cairn"
	path := filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// proc runs one kind of cairn child (an apiserver, or one controller-manager
// replica) as processes one after another, each logging to its own file.
type proc struct {
	t      *testing.T
	name   string
	bin    string
	args   []string
	logDir string

	n       int
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
}

func newProc(t *testing.T, name, bin string, args ...string) *proc {
	t.Helper()
	p := &proc{t: t, name: name, bin: bin, args: args, logDir: t.TempDir()}
	t.Cleanup(p.stop)
	return p
}

// start starts the next child.
func (p *proc) start() {
	p.t.Helper()
	p.logPath = filepath.Join(p.logDir, fmt.Sprintf("%s-%02d.log", p.name, p.n))
	p.n++
	f, err := os.Create(p.logPath)
	if err != nil {
		p.t.Fatal(err)
	}
	cmd := exec.Command(p.bin, p.args...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		p.t.Fatalf("start %s: %v", p.name, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		f.Close()
		close(done)
	}()
	p.cmd, p.done = cmd, done
}

// waitHTTPReady waits until the child answers GET url with 200.
func (p *proc) waitHTTPReady(url string) {
	p.t.Helper()
	hc := &http.Client{Timeout: time.Second}
	defer hc.CloseIdleConnections()
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-p.done:
			p.t.Fatalf("%s exited before it was ready:\n%s", p.name, p.output())
		default:
		}
		resp, err := hc.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("%s not ready after 30s (last error %v):\n%s", p.name, err, p.output())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// alive fails the test if the running child has exited.
func (p *proc) alive() {
	p.t.Helper()
	select {
	case <-p.done:
		p.t.Fatalf("%s (child %d) died on its own (%v):\n%s", p.name, p.n-1, p.cmd.ProcessState, p.output())
	default:
	}
}

// kill sends SIGKILL to the running child and reaps it.
func (p *proc) kill() {
	p.t.Helper()
	p.alive()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		p.t.Fatalf("kill %s: %v", p.name, err)
	}
	<-p.done
	p.crashed()
	p.cmd = nil
}

// interrupt sends SIGINT and waits for a clean exit.
func (p *proc) interrupt(timeout time.Duration) {
	p.t.Helper()
	p.alive()
	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
		p.t.Fatalf("interrupt %s: %v", p.name, err)
	}
	select {
	case <-p.done:
	case <-time.After(timeout):
		p.t.Fatalf("%s did not exit within %v of SIGINT:\n%s", p.name, timeout, p.output())
	}
	p.crashed()
	if !p.cmd.ProcessState.Success() {
		p.t.Errorf("%s exited with %v after SIGINT:\n%s", p.name, p.cmd.ProcessState, p.output())
	}
	p.cmd = nil
}

// crashed fails the test if the child's output shows a panic.
func (p *proc) crashed() {
	p.t.Helper()
	if out := p.output(); strings.Contains(out, "panic:") || strings.Contains(out, "fatal error:") || strings.Contains(out, "DATA RACE") {
		p.t.Errorf("%s (child %d) crashed:\n%s", p.name, p.n-1, out)
	}
}

// stop kills the running child, if any (cleanup).
func (p *proc) stop() {
	if p.cmd == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
	if p.t.Failed() {
		p.t.Logf("last %s child (%d):\n%s", p.name, p.n-1, p.output())
	}
	p.cmd = nil
}

// output is the current child's output, the last 8 KiB of it.
func (p *proc) output() string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return fmt.Sprintf("(no output: %v)", err)
	}
	if len(b) > 8<<10 {
		b = b[len(b)-8<<10:]
	}
	return string(b)
}
