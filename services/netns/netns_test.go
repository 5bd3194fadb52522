package netns

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// newNS creates a named network namespace for the test (ip netns add) with
// its loopback up, and deletes it at cleanup. Skipped without root or ip.
func newNS(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to create a network namespace")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skipf("ip (iproute2) not installed: %v", err)
	}
	name := fmt.Sprintf("cairn-netns-test-%d-%d", os.Getpid(), time.Now().UnixNano()%1e6)
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "delete", name).CombinedOutput(); err != nil {
			t.Errorf("ip netns delete: %v: %s", err, out)
		}
	})
	if out, err := exec.Command("ip", "-n", name, "link", "set", "lo", "up").CombinedOutput(); err != nil {
		t.Fatalf("lo up: %v: %s", err, out)
	}
	return filepath.Join("/run/netns", name)
}

func nsID(t *testing.T, path string) string {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%d:%d", st.Dev, st.Ino)
}

// greet serves one line naming who answered, on every connection.
func greet(t *testing.T, ln net.Listener, who string) {
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			fmt.Fprintln(c, who)
			c.Close()
		}
	})
}

func read(t *testing.T, c net.Conn) string {
	t.Helper()
	defer c.Close()
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	return strings.TrimSpace(line)
}

// TestListenAndDial binds the same loopback address and port on the host
// and in the namespace (possible only because they are different stacks)
// and checks each side's dial reaches its own listener.
func TestListenAndDial(t *testing.T) {
	ns := newNS(t)
	host, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	greet(t, host, "host")
	addr := host.Addr().String()

	in, err := Listen(ns, "tcp", addr)
	if err != nil {
		t.Fatalf("Listen in the namespace on the host's own %s: %v", addr, err)
	}
	greet(t, in, "namespace")

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for range 20 {
		c, err := DialContext(ctx, ns, "tcp", addr)
		if err != nil {
			t.Fatalf("DialContext in the namespace: %v", err)
		}
		if got := read(t, c); got != "namespace" {
			t.Fatalf("dial in the namespace answered by %q", got)
		}
		c, err = (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		if err != nil {
			t.Fatalf("dial on the host: %v", err)
		}
		if got := read(t, c); got != "host" {
			t.Fatalf("dial on the host answered by %q", got)
		}
	}
}

// TestDoRestoresThread checks fn runs in the namespace and that, after
// many concurrent calls, no goroutine of the caller is left in it.
func TestDoRestoresThread(t *testing.T) {
	ns := newNS(t)
	want, self := nsID(t, ns), nsID(t, "/proc/self/ns/net")
	if want == self {
		t.Fatal("the new namespace is the test's own")
	}
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for range 50 {
		wg.Go(func() {
			for range 4 {
				errs <- Do(ns, func() error {
					if got := nsID(t, "/proc/thread-self/ns/net"); got != want {
						return fmt.Errorf("fn ran in %s, want %s", got, want)
					}
					return nil
				})
				if got := nsID(t, "/proc/thread-self/ns/net"); got != self {
					errs <- fmt.Errorf("caller's thread left in %s", got)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

// TestErrors: a missing namespace and a failing fn are reported, and fn's
// own error comes back unwrapped-comparable.
func TestErrors(t *testing.T) {
	if _, err := Listen("/run/netns/cairn-does-not-exist", "tcp", "127.0.0.1:0"); err == nil {
		t.Error("Listen in a missing namespace succeeded")
	}
	ns := newNS(t)
	if _, err := Listen(ns, "tcp", "192.0.2.1:0"); err == nil {
		t.Error("Listen on an address the namespace does not have succeeded")
	}
	sentinel := fmt.Errorf("boom")
	if err := Do(ns, func() error { return sentinel }); err != sentinel {
		t.Errorf("Do returned %v, want fn's error", err)
	}
}
