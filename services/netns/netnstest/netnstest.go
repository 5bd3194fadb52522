// Package netnstest creates network namespaces for tests.
package netnstest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"testing"
)

var seq atomic.Int64

// New creates a named network namespace (ip netns add) with its loopback
// up, deletes it at the test's cleanup, and returns its path. It skips the
// test without root, or without one of ip and the tools given.
func New(t testing.TB, tools ...string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to create a network namespace")
	}
	for _, tool := range append([]string{"ip"}, tools...) {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed (ops/node-deps.sh installs iproute2 and nftables): %v", tool, err)
		}
	}
	name := fmt.Sprintf("cairn-test-%d-%d", os.Getpid(), seq.Add(1))
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "delete", name).CombinedOutput(); err != nil {
			t.Errorf("ip netns delete: %v: %s", err, out)
		}
	})
	IP(t, name, "link", "set", "lo", "up")
	return filepath.Join("/run/netns", name)
}

// IP runs `ip -n ns args...` (ns a name or a path under /run/netns).
func IP(t testing.TB, ns string, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", append([]string{"-n", filepath.Base(ns)}, args...)...).CombinedOutput(); err != nil {
		t.Fatalf("ip -n %s %v: %v: %s", filepath.Base(ns), args, err, out)
	}
}
