package netns

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"

	"golang.org/x/sys/unix"
)

// Do runs fn on an OS thread switched into the network namespace at
// nsPath, then switches the thread back. fn must not start goroutines that
// create sockets: they would run on other threads, in the caller's
// namespace. The error is fn's, joined with any error of switching.
func Do(nsPath string, fn func() error) error {
	ns, err := unix.Open(nsPath, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("netns: open %s: %w", nsPath, err)
	}
	defer unix.Close(ns)
	return DoFD(ns, fn)
}

// DoFD is Do with the namespace given as an open file descriptor.
func DoFD(nsFD int, fn func() error) error {
	errc := make(chan error, 1)
	// A goroutine of its own: if the thread cannot be switched back, the
	// goroutine exits still locked and the runtime terminates the thread.
	go func() {
		runtime.LockOSThread()
		orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("netns: open own namespace: %w", err)
			return
		}
		defer unix.Close(orig)
		if err := unix.Setns(nsFD, unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("netns: setns: %w", err)
			return
		}
		ferr := fn()
		if err := unix.Setns(orig, unix.CLONE_NEWNET); err != nil {
			errc <- errors.Join(ferr, fmt.Errorf("netns: setns back: %w", err))
			return // the thread stays locked and dies with this goroutine
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// dialer dials without Happy Eyeballs, so that every socket is made on the
// calling (switched) thread rather than in helper goroutines.
var dialer = net.Dialer{FallbackDelay: -1}

// Listen announces on the local address addr inside the network namespace
// at nsPath (network as for net.Listen).
func Listen(nsPath, network, addr string) (net.Listener, error) {
	var ln net.Listener
	err := Do(nsPath, func() error {
		var err error
		ln, err = (&net.ListenConfig{}).Listen(context.Background(), network, addr)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("netns: listen %s %s in %s: %w", network, addr, nsPath, err)
	}
	return ln, nil
}

// DialContext connects to addr from inside the network namespace at
// nsPath (network as for net.Dial). ctx bounds the connect. addr should be
// an IP address: Go resolves a host name on goroutines of its own, so a
// name's DNS queries would leave from the caller's namespace.
func DialContext(ctx context.Context, nsPath, network, addr string) (net.Conn, error) {
	var conn net.Conn
	err := Do(nsPath, func() error {
		var err error
		conn, err = dialer.DialContext(ctx, network, addr)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("netns: dial %s %s in %s: %w", network, addr, nsPath, err)
	}
	return conn, nil
}

// Dialer returns a DialContext function for an http.Transport (or a gRPC
// or NATS dialer) whose connections are made inside the namespace.
func Dialer(nsPath string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		return DialContext(ctx, nsPath, network, addr)
	}
}
