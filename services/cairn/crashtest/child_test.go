package crashtest

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/cairn-dev/cairn/services/cairn/cairntest"
)

// The user the apiserver authenticates the load as; every acknowledged
// write's event must name it.
const (
	adminToken = "crash-admin-token"
	adminUser  = "admin"
	adminGroup = "system:masters"
)

// newAPIServerProc returns the runner of the `cairn apiserver` children,
// each authenticating adminToken, on etcd and NATS at the given URLs.
func newAPIServerProc(t *testing.T, bin, etcdURL, natsURL, addr string) *cairntest.Proc {
	t.Helper()
	tokens := filepath.Join(t.TempDir(), "tokens.csv")
	line := fmt.Sprintf("%s,%s,%s-uid,%q\n", adminToken, adminUser, adminUser, adminGroup)
	if err := os.WriteFile(tokens, []byte(line), 0o600); err != nil {
		t.Fatal(err)
	}
	return cairntest.NewProc(t, "cairn apiserver", bin, "apiserver",
		"--etcd-endpoints", etcdURL, "--nats-url", natsURL, "--listen", addr,
		"--insecure-http", "--token-auth-file", tokens, "--election-ttl", "2s", "--log-level", "warn")
}
