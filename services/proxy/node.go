package proxy

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"

	"github.com/cairn-dev/cairn/events/consumer"
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
	if _, err := NewProxy(m, nft, Options{Config: Config{ClusterCIDR: cfg.ClusterCIDR}, MinSyncPeriod: cfg.MinSyncPeriod, Metrics: cfg.Metrics}); err != nil {
		return err
	}
	if cfg.NetNS != "" {
		relay, err := newRelay(cfg, log)
		if err != nil {
			return err
		}
		m.Add("apiserver-relay", relay)
	}
	return m.Run(ctx)
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
