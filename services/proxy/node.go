package proxy

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os/exec"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"

	"github.com/cairn-dev/cairn/events/consumer"
	"github.com/cairn-dev/cairn/schemas"
	"github.com/cairn-dev/cairn/services/netns"
)

// NodeConfig configures the proxy of one node (RunNode).
type NodeConfig struct {
	// RestConfig reaches the apiserver as the proxy (user
	// system:kube-proxy, bound to the ClusterRole system:node-proxier).
	RestConfig *rest.Config
	JS         jetstream.JetStream
	NodeName   string
	// NetNS is the node's network namespace (a path); the table is
	// programmed there and the apiserver relay listens there. Empty: the
	// process's own namespace, and no relay.
	NetNS string
	// ClusterCIDR is the pods' range (kube-proxy's --cluster-cidr).
	ClusterCIDR string
	// ServiceCIDR is the Services' range (the apiservers'
	// --service-cluster-ip-range); default schemas.DefaultClusterIPRange.
	ServiceCIDR string
	// APIServer is host:port of the apiserver the relay forwards to;
	// empty: RestConfig.Host's.
	APIServer string
	// MinSyncPeriod: see Options.
	MinSyncPeriod time.Duration
	// Metrics, if set, gets the proxy's metrics.
	Metrics prometheus.Registerer
	Log     *slog.Logger
}

// RunNode runs a node's proxy until ctx ends: a consumer.Manager of its
// own (its own credentials; it follows only Services and EndpointSlices),
// the Proxy programming the table in NetNS, and the apiserver Relay there.
// The table stays when it returns, for the next proxy to take over.
func RunNode(ctx context.Context, cfg NodeConfig) error {
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("node", cfg.NodeName)
	nft, err := NewNFT(cfg.NetNS)
	if err != nil {
		return err
	}
	m, err := consumer.NewManager(consumer.ManagerOptions{RestConfig: cfg.RestConfig, JS: cfg.JS, UserAgent: "cairn-proxy", Conns: 2, Log: log})
	if err != nil {
		return fmt.Errorf("proxy: %w", err)
	}
	if _, err := NewProxy(m, nft, Options{
		Config:        Config{ClusterCIDR: cfg.ClusterCIDR, Netlink: true, NetNS: cfg.NetNS, NodeName: cfg.NodeName},
		MinSyncPeriod: cfg.MinSyncPeriod, Metrics: cfg.Metrics, HealthChecks: true,
	}); err != nil {
		return err
	}
	if cfg.NetNS != "" {
		if err := prepareNetNS(ctx, cfg); err != nil {
			return err
		}
		relay, err := newRelay(cfg, log)
		if err != nil {
			return err
		}
		m.Add("apiserver-relay", relay)
	}
	return m.Run(ctx)
}

// prepareNetNS puts APIServerAddress on the loopback of the node's
// namespace and routes the Service range there, from that address.
//
// A node has no default route (nothing leaves it), so without a route a
// connection to a ClusterIP that was not DNATed, one with no endpoints,
// would fail routing (network unreachable) before the forward hook that
// rejects it (connection refused, as on a kube node whose default route
// carries it there). What the rules let through dies on lo: a forwarded
// packet arriving on lo for an address that is not local is dropped as a
// martian. The source address makes the node's own connections to a
// ClusterIP leave from APIServerAddress rather than 127.0.0.1, which could
// not be masqueraded towards a pod.
func prepareNetNS(ctx context.Context, cfg NodeConfig) error {
	cidr := cfg.ServiceCIDR
	if cidr == "" {
		cidr = schemas.DefaultClusterIPRange
	}
	for _, args := range [][]string{
		{"addr", "replace", APIServerAddress + "/32", "dev", "lo"},
		{"route", "replace", cidr, "dev", "lo", "src", APIServerAddress},
	} {
		if err := netns.Do(cfg.NetNS, exec.CommandContext(ctx, "ip", args...).Run); err != nil {
			return fmt.Errorf("proxy: ip %v in %s: %w", args, cfg.NetNS, err)
		}
	}
	return nil
}

func newRelay(cfg NodeConfig, log *slog.Logger) (*Relay, error) {
	upstream := cfg.APIServer
	if upstream == "" {
		u, err := url.Parse(cfg.RestConfig.Host)
		if err != nil {
			return nil, fmt.Errorf("proxy: apiserver URL %q: %w", cfg.RestConfig.Host, err)
		}
		upstream = u.Host
		if u.Port() == "" {
			upstream = net.JoinHostPort(u.Hostname(), "443")
		}
	}
	_, portText, err := net.SplitHostPort(upstream)
	if err != nil {
		return nil, fmt.Errorf("proxy: apiserver address %q: %w", upstream, err)
	}
	port, err := strconv.Atoi(portText)
	if err != nil {
		return nil, fmt.Errorf("proxy: apiserver port %q: %w", portText, err)
	}
	var d net.Dialer
	return &Relay{NetNS: cfg.NetNS, Port: port, Log: log.With("component", "apiserver-relay"),
		Dial: func(ctx context.Context) (net.Conn, error) { return d.DialContext(ctx, "tcp", upstream) }}, nil
}
