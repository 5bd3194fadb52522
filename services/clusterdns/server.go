package clusterdns

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/coredns/caddy"

	// CoreDNS's server type and only the plugins cairn's Corefile uses
	// (kubeadm's set, plus log and hosts): importing coredns/core/plugin
	// would link every plugin and the cloud SDKs of route53, azure and
	// clouddns.
	_ "github.com/coredns/coredns/core/dnsserver"
	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/hosts"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/metrics"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
)

// Plugins are the CoreDNS plugins linked into cairn; a Corefile naming any
// other is refused at start.
var Plugins = []string{"bind", "cache", "errors", "forward", "health", "hosts", "kubernetes", "loadbalance", "log", "loop", "prometheus", "ready", "reload"}

// caddyMu serialises starts and stops: caddy keeps its instances in a
// process-wide list.
var caddyMu sync.Mutex

// ErrCorefile is returned by Run for a Corefile CoreDNS refuses.
var ErrCorefile = errors.New("clusterdns: bad Corefile")

// Run serves DNS with CoreDNS as the Corefile at path says, until ctx ends;
// then it stops every server of that Corefile (also one the reload plugin
// restarted after the file changed) and returns nil. A Corefile that does
// not start (a syntax error, an unknown plugin, a port in use) is an error
// wrapping ErrCorefile.
func Run(ctx context.Context, path string) error {
	body, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("clusterdns: %w", err)
	}
	caddyMu.Lock()
	caddy.Quiet = true
	inst, err := caddy.Start(caddy.CaddyfileInput{Filepath: path, Contents: body, ServerTypeName: "dns"})
	caddyMu.Unlock()
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrCorefile, path, err)
	}
	done := make(chan struct{})
	go func() {
		inst.Wait()
		close(done)
	}()
	select {
	case <-ctx.Done():
	case <-done:
	}
	stop(path)
	return nil
}

// stop stops the instances serving the Corefile at path and runs their
// shutdown callbacks (the kubernetes plugin's informers).
func stop(path string) {
	caddyMu.Lock()
	defer caddyMu.Unlock()
	for _, inst := range caddy.Instances() {
		if inst.Caddyfile() == nil || inst.Caddyfile().Path() != path {
			continue
		}
		_ = inst.Stop()
		inst.ShutdownCallbacks()
	}
}
