package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/cairn-dev/cairn/services/netns"
)

// APIServerAddress is the address at which pods reach the apiserver: the
// same in every node's network namespace, where the node's proxy relays
// each connection to it, on the apiserver's own port, to the apiserver
// (Relay). Apiservers advertise it (--advertise-address), so it is the
// endpoint of the kubernetes Service and 10.96.0.1:443 is DNATed to it.
// It is in the shared address space 100.64.0.0/10 (RFC 6598), clear of
// the default Service (10.96.0.0/12) and pod (10.64.0.0/10) ranges; not
// link-local or loopback, which Kubernetes refuses as an endpoint. It
// exists only inside the node namespaces, which route nothing off the node.
const APIServerAddress = "100.64.0.1"

// Relay serves APIServerAddress:port inside the network namespace nsPath
// (which must have the address, see RunNode): it listens there
// (services/netns), and copies every connection, as it is (TLS passes
// through: the apiserver authenticates the pod), to a connection dial
// makes, e.g. to the apiserver on the host's loopback. Run blocks until
// ctx ends, then closes the listener and every connection.
type Relay struct {
	NetNS string
	Port  int
	// Dial reaches the apiserver.
	Dial func(ctx context.Context) (net.Conn, error)
	Log  *slog.Logger
}

// Run serves until ctx ends.
func (r *Relay) Run(ctx context.Context) error {
	ln, err := netns.Listen(r.NetNS, "tcp", net.JoinHostPort(APIServerAddress, fmt.Sprint(r.Port)))
	if err != nil {
		return fmt.Errorf("proxy: apiserver relay: %w", err)
	}
	r.Log.Info("relaying to the apiserver", "listen", ln.Addr(), "netns", r.NetNS)
	var wg sync.WaitGroup
	var mu sync.Mutex
	open := map[net.Conn]bool{}
	track := func(c net.Conn, on bool) {
		mu.Lock()
		defer mu.Unlock()
		if on {
			open[c] = true
		} else {
			delete(open, c)
		}
	}
	stop := context.AfterFunc(ctx, func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for c := range open {
			c.Close()
		}
	})
	defer stop()
	defer wg.Wait()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return fmt.Errorf("proxy: apiserver relay: %w", err)
		}
		track(c, true)
		wg.Go(func() {
			defer track(c, false)
			r.relay(ctx, c, track)
		})
	}
}

// relay copies c to a new upstream connection and back, each direction
// half-closed when its source ends.
func (r *Relay) relay(ctx context.Context, c net.Conn, track func(net.Conn, bool)) {
	defer c.Close()
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	up, err := r.Dial(dctx)
	cancel()
	if err != nil {
		r.Log.Warn("apiserver relay: dial", "from", c.RemoteAddr(), "err", err)
		return
	}
	track(up, true)
	defer track(up, false)
	defer up.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		copyHalf(up, c)
	}()
	copyHalf(c, up)
	<-done
}

func copyHalf(dst, src net.Conn) {
	// An error is a peer gone mid-stream: nothing to do but close.
	_, _ = io.Copy(dst, src)
	if cw, ok := dst.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	} else {
		dst.Close()
	}
}
