// Package cairntest helps tests that run the cairn binary as child
// processes (the kubectl, end-to-end, history, crash and scale-out tests):
// it builds the binary once per test (Build), finds free loopback addresses
// for the children (FreeAddr) and runs them: Proc for single components run
// one after another, Up for a `cairn up` with readiness, stop by signal and
// exit-status checks. Kubectl drives the real kubectl against a cluster
// with its kubeconfig and a private HOME, and StartKubelet stands in,
// through the API, for the kubelet of a `cairn up --node=false`, reporting
// pods Running and Ready.
package cairntest

import (
	"bytes"
	"context"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Build builds the cairn binary into t.TempDir() and returns its path. It
// skips the test when no Go toolchain can be found.
func Build(t testing.TB) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
		if _, serr := os.Stat(goBin); serr != nil {
			t.Skipf("no go toolchain to build cairn: %v", err)
		}
	}
	bin := filepath.Join(t.TempDir(), "cairn")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goBin, "build", "-o", bin, "github.com/cairn-dev/cairn/services/cairn")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build cairn: %v\n%s", err, out)
	}
	return bin
}

// FreeAddr returns a loopback address with a port nobody listens on. A
// child restarted on it keeps the address (Go listeners set SO_REUSEADDR).
//
// The port is drawn from below the kernel's ephemeral range
// (net.ipv4.ip_local_port_range), which the kernel never hands out for a
// bind to port 0 or an outgoing connection: a port picked from inside it
// and closed again could be taken by one of those (the child's own
// embedded etcd and NATS, or any other test's connection) before the child
// binds it, which failed a CI run with "address already in use".
func FreeAddr(t testing.TB) string {
	t.Helper()
	lo, hi := freePortRange()
	for range 1000 {
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(lo+rand.IntN(hi-lo)))
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		if err := ln.Close(); err != nil {
			t.Fatal(err)
		}
		return addr
	}
	t.Fatalf("cairntest: no free port in [%d, %d)", lo, hi)
	return ""
}

// freePortRange is [10000, the first ephemeral port), or a fixed range
// under the default ephemeral range (32768) when that cannot be read or
// leaves too little room.
func freePortRange() (lo, hi int) {
	lo, hi = 10000, 32768
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return lo, hi
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return lo, hi
	}
	if first, err := strconv.Atoi(f[0]); err == nil && first-lo >= 1000 {
		hi = first
	}
	return lo, hi
}

// Buffer collects a child's output: an io.Writer safe for the child's
// writes while the test reads String.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Tail is the last n lines of s, for failure messages.
func Tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
