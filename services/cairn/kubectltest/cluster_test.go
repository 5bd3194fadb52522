package kubectltest

import (
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/services/cairn/cairntest"
)

const (
	readyTimeout = 45 * time.Second
	stopTimeout  = 20 * time.Second
	callTimeout  = 30 * time.Second
)

// cluster is one running `cairn up` child process without a node and the
// kubectl that talks to it.
type cluster struct {
	*cairntest.Up
	*cairntest.Kubectl
}

// startCluster runs `cairn up --node=false [flags]` and waits until the apiserver
// is ready. The process is stopped at owner's cleanup if the test did not
// stop it; owner is t or a parent of t, so a subtest can start a cluster
// that outlives it.
func startCluster(t, owner *testing.T, bin, kubectl, dataDir, addr, home string, flags ...string) *cluster {
	t.Helper()
	u := cairntest.StartUp(t, owner, cairntest.UpConfig{Bin: bin, DataDir: dataDir, Addr: addr,
		Args: append([]string{"--node=false"}, flags...), StopTimeout: stopTimeout})
	c := &cluster{Up: u, Kubectl: &cairntest.Kubectl{Path: kubectl, Kubeconfig: u.Kubeconfig(), Home: home, Timeout: callTimeout}}
	c.WaitReady(t, readyTimeout, func() error {
		if r := c.Run(t, "get", "--raw", "/readyz"); r.Err != nil || strings.TrimSpace(r.Stdout) != "ok" {
			return errors.New(r.String())
		}
		return nil
	})
	return c
}

// stop sends SIGINT and requires a clean exit (code 0) within stopTimeout.
func (c *cluster) stop(t *testing.T) { c.Stop(t, syscall.SIGINT) }
