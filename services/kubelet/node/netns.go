package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/services/netns"
)

// netnsPath resolves a namespace name to its path under /run/netns.
func netnsPath(name string) string {
	if filepath.IsAbs(name) {
		return name
	}
	return filepath.Join("/run/netns", name)
}

// ensureNetNS makes sure the namespace exists, creating it with `ip netns
// add` when allowed, and brings its loopback up. created reports whether
// this call made it.
func ensureNetNS(ctx context.Context, name string, create bool) (path string, created bool, err error) {
	path = netnsPath(name)
	if _, err := os.Stat(path); err == nil {
		return path, false, setLoUp(ctx, path)
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", false, fmt.Errorf("node: netns %s: %w", path, err)
	}
	if !create {
		return "", false, fmt.Errorf("node: netns %s does not exist (set CreateNetNS)", path)
	}
	if filepath.Dir(path) != "/run/netns" {
		return "", false, fmt.Errorf("node: can only create named namespaces under /run/netns, not %s", path)
	}
	if out, err := exec.CommandContext(ctx, "ip", "netns", "add", filepath.Base(path)).CombinedOutput(); err != nil {
		return "", false, fmt.Errorf("node: ip netns add %s: %w: %s", filepath.Base(path), err, strings.TrimSpace(string(out)))
	}
	if err := setLoUp(ctx, path); err != nil {
		_ = deleteNetNS(context.WithoutCancel(ctx), path)
		return "", false, err
	}
	return path, true, nil
}

func setLoUp(ctx context.Context, path string) error {
	if out, err := exec.CommandContext(ctx, "ip", "-n", filepath.Base(path), "link", "set", "lo", "up").CombinedOutput(); err != nil {
		// ip -n only knows names under /run/netns; fall back to nsenter.
		if out2, err2 := exec.CommandContext(ctx, "nsenter", "--net="+path, "ip", "link", "set", "lo", "up").CombinedOutput(); err2 != nil {
			return fmt.Errorf("node: bring lo up in %s: %w: %s %s", path, err, strings.TrimSpace(string(out)), strings.TrimSpace(string(out2)))
		}
	}
	return nil
}

// deleteNetNS deletes the namespace, retrying a few times: `ip netns
// delete` unmounts and then unlinks the file, and either can fail for a
// moment while processes of the namespace are still exiting. A namespace
// already gone is deleted.
func deleteNetNS(ctx context.Context, path string) error {
	var err error
	for attempt := range 5 {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return errors.Join(err, ctx.Err())
			case <-time.After(time.Duration(attempt) * 100 * time.Millisecond):
			}
		}
		if _, serr := os.Stat(path); errors.Is(serr, os.ErrNotExist) {
			return nil
		}
		out, cerr := exec.CommandContext(ctx, "ip", "netns", "delete", filepath.Base(path)).CombinedOutput()
		if cerr == nil {
			return nil
		}
		err = fmt.Errorf("node: ip netns delete %s: %w: %s", filepath.Base(path), cerr, strings.TrimSpace(string(out)))
	}
	return err
}

// dialIn and listenIn make their socket on a thread inside the namespace
// (services/netns): it stays there whichever goroutine uses it later.
func dialIn(ctx context.Context, nsFD int, network, addr string) (net.Conn, error) {
	var conn net.Conn
	err := netns.DoFD(nsFD, func() error {
		var err error
		conn, err = dialer.DialContext(ctx, network, addr)
		return err
	})
	return conn, err
}

// dialer dials without Happy Eyeballs, so that every socket is made on the
// calling (namespace-switched) thread rather than in helper goroutines.
var dialer = net.Dialer{FallbackDelay: -1}

func listenIn(ctx context.Context, nsFD int, network, addr string) (net.Listener, error) {
	var ln net.Listener
	err := netns.DoFD(nsFD, func() error {
		var err error
		ln, err = (&net.ListenConfig{}).Listen(ctx, network, addr)
		return err
	})
	return ln, err
}

// startIn starts cmd with its network namespace set to nsFD: the fork
// happens on a thread already switched into the namespace, so the child (and
// everything it starts: shims, runc, CNI plugins) is born there, while its
// mount namespace stays the host's.
func startIn(nsFD int, cmd *exec.Cmd) error {
	return netns.DoFD(nsFD, cmd.Start)
}
