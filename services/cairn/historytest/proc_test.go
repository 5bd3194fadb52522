package historytest

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/cairn-dev/cairn/services/cairn/cairntest"
)

const (
	upTimeout   = 60 * time.Second // cairn up to print that the history is ready
	stopTimeout = 30 * time.Second // cairn up to end after a signal
	callTimeout = 60 * time.Second // one cairn or kubectl command
)

// up is one `cairn up` child process without a node, and the kubectl that
// talks to it.
type up struct {
	*cairntest.Up
	*cairntest.Kubectl
}

// startUp runs `cairn up` on dir and addr without a node and waits until it
// prints that the history is ready and serves /readyz. The process is
// stopped at cleanup if the test has not stopped it.
func startUp(t *testing.T, bin, dir, addr string) *up {
	t.Helper()
	cu := cairntest.StartUp(t, t, cairntest.UpConfig{Bin: bin, DataDir: dir, Addr: addr,
		Args: []string{"--node=false"}, StopTimeout: stopTimeout})
	// The kubectl has a private HOME: no discovery cache of other runs.
	u := &up{Up: cu, Kubectl: &cairntest.Kubectl{Path: cairntest.KubectlPath(t), Kubeconfig: cu.Kubeconfig(),
		Home: filepath.Join(dir, "home"), Timeout: callTimeout}}
	u.WaitReady(t, upTimeout, func() error {
		if !strings.Contains(u.Stdout(), "history ready") {
			return errors.New(`no "history ready" on stdout yet`)
		}
		return u.ready(t)
	})
	return u
}

// ready returns nil once the apiserver answers /readyz with ok.
func (u *up) ready(t *testing.T) error {
	cs, err := clientFor(u.Up.Kubeconfig())
	if err != nil {
		return err
	}
	b, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(t.Context())
	if err == nil && string(b) != "ok" {
		err = errors.New("readyz: " + string(b))
	}
	return err
}

func clientFor(kubeconfig string) (*kubernetes.Clientset, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}

// kubectl runs the real kubectl against u with stdin, failing the test
// unless it exits 0, and returns its stdout.
func (u *up) kubectl(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	r := u.RunWith(t, stdin, 0, args...)
	if r.Err != nil {
		t.Fatalf("%s", r)
	}
	return r.Stdout
}

// cairn runs the cairn binary bin with args, failing the test unless it
// exits 0, and returns its stdout.
func cairn(t *testing.T, bin string, args ...string) string {
	t.Helper()
	r := cairntest.Run(t, callTimeout, bin, args...)
	if r.Err != nil {
		t.Fatalf("%s", r)
	}
	return r.Stdout
}

// cairn runs a cairn command against u's data directory.
func (u *up) cairn(t *testing.T, bin string, args ...string) string {
	t.Helper()
	return cairn(t, bin, append(args, "--data-dir", u.DataDir)...)
}
