package proxy

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/events/consumer"
)

// Options configure a Proxy.
type Options struct {
	Config
	// MinSyncPeriod is the least time between two Syncs: changes arriving
	// meanwhile go into one transaction (kube-proxy's --min-sync-period).
	// Zero: sync as soon as a change arrives.
	MinSyncPeriod time.Duration
	// RetryPeriod is the wait after a failed Sync before the next (full)
	// one; default 1s.
	RetryPeriod time.Duration
	// Metrics, if set, gets the proxy's metrics (sync latency, rules
	// programmed, failures).
	Metrics prometheus.Registerer
	// HealthChecks serves the health checks of the Services with
	// externalTrafficPolicy Local on their healthCheckNodePorts, in
	// NetNS (kube-proxy's service health server).
	HealthChecks bool
}

// Proxy keeps a node's nftables in step with the log's Services and
// EndpointSlices: a Manager's caches feed a Proxier, and Run syncs it.
type Proxy struct {
	proxier  *Proxier
	opts     Options
	log      *slog.Logger
	services *consumer.Cache[*v1.Service]
	slices   *consumer.Cache[*discovery.EndpointSlice]
	nodes    *consumer.Cache[*v1.Node] // nil without NodeName
	kick     chan struct{}
	metrics  *metrics
	health   *healthServer // nil without HealthChecks
	healthy  atomic.Bool   // the last Sync succeeded
}

var _ consumer.Runner = (*Proxy)(nil)

// NewProxy registers on m the caches of Services and EndpointSlices (and,
// with NodeName, of that one Node, for its zone) and a Proxy that programs
// nft (NewNFT of the node's namespace); m runs it.
func NewProxy(m *consumer.Manager, nft NFT, opts Options) (*Proxy, error) {
	if opts.RetryPeriod == 0 {
		opts.RetryPeriod = time.Second
	}
	services, err := consumer.CacheFor[*v1.Service](m, v1.SchemeGroupVersion.WithResource("services"))
	if err != nil {
		return nil, fmt.Errorf("proxy: services cache: %w", err)
	}
	slices, err := consumer.CacheFor[*discovery.EndpointSlice](m, discovery.SchemeGroupVersion.WithResource("endpointslices"))
	if err != nil {
		return nil, fmt.Errorf("proxy: endpointslices cache: %w", err)
	}
	met, err := newMetrics(opts.Metrics)
	if err != nil {
		return nil, err
	}
	px := &Proxy{metrics: met,
		proxier: New(nft, opts.Config), opts: opts, log: m.Log().With("component", "proxy"),
		services: services, slices: slices, kick: make(chan struct{}, 1),
	}
	services.AddHandler(consumer.Handler[*v1.Service]{
		OnAdd:    func(s *v1.Service, _ *events.Event) { px.proxier.SetService(s); px.poke() },
		OnUpdate: func(_, s *v1.Service, _ *events.Event) { px.proxier.SetService(s); px.poke() },
		OnDelete: func(s *v1.Service, _ *events.Event) {
			px.proxier.DeleteService(types.NamespacedName{Namespace: s.Namespace, Name: s.Name})
			px.poke()
		},
	})
	slices.AddHandler(consumer.Handler[*discovery.EndpointSlice]{
		OnAdd:    func(s *discovery.EndpointSlice, _ *events.Event) { px.proxier.SetEndpointSlice(s); px.poke() },
		OnUpdate: func(_, s *discovery.EndpointSlice, _ *events.Event) { px.proxier.SetEndpointSlice(s); px.poke() },
		OnDelete: func(s *discovery.EndpointSlice, _ *events.Event) { px.proxier.DeleteEndpointSlice(s); px.poke() },
	})
	if opts.NodeName != "" {
		// Only the proxy's own Node, as kube-proxy's field selector: its
		// labels carry the zone for topology hints.
		px.nodes, err = consumer.CacheFor[*v1.Node](m, v1.SchemeGroupVersion.WithResource("nodes"), consumer.Named(opts.NodeName))
		if err != nil {
			return nil, fmt.Errorf("proxy: node cache: %w", err)
		}
		// The Node's status changes often; only a new zone is a change.
		labels := func(l map[string]string) {
			if px.proxier.SetNodeLabels(l) {
				px.poke()
			}
		}
		px.nodes.AddHandler(consumer.Handler[*v1.Node]{
			OnAdd:    func(n *v1.Node, _ *events.Event) { labels(n.Labels) },
			OnUpdate: func(_, n *v1.Node, _ *events.Event) { labels(n.Labels) },
			OnDelete: func(*v1.Node, *events.Event) { labels(nil) },
		})
	}
	if opts.HealthChecks {
		px.health = newHealthServer(opts.NetNS, px.log.With("component", "health-check"), px.healthy.Load)
	}
	m.Add("proxy", px)
	return px, nil
}

func (px *Proxy) poke() {
	select {
	case px.kick <- struct{}{}:
	default:
	}
}

// Run waits for both caches, programs the whole table once, then syncs
// after every change (at most once per MinSyncPeriod) until ctx ends. A
// failed Sync is logged and retried after RetryPeriod, in full. The rules
// stay in place when Run returns: a restarted proxy takes them over.
func (px *Proxy) Run(ctx context.Context) error {
	if px.health != nil {
		defer px.health.close()
	}
	caches := []consumer.Syncer{px.services, px.slices}
	if px.nodes != nil {
		caches = append(caches, px.nodes)
	}
	for _, c := range caches {
		if err := c.WaitForSync(ctx); err != nil {
			if ctx.Err() != nil {
				return nil // ended before the caches synced: a clean exit
			}
			return fmt.Errorf("proxy: wait for caches: %w", err)
		}
	}
	px.poke()
	var last time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-px.kick:
		}
		if wait := px.opts.MinSyncPeriod - time.Since(last); wait > 0 {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(wait):
			}
		}
		last = time.Now()
		res, err := px.proxier.Sync(ctx)
		px.healthy.Store(err == nil)
		if err != nil {
			px.metrics.failures.Inc()
			px.log.Error("sync failed", "err", err)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(px.opts.RetryPeriod):
			}
			px.poke()
			continue
		}
		px.metrics.synced(res)
		if px.health != nil {
			px.health.sync(px.proxier.HealthChecks())
		}
		px.log.Debug("synced", "full", res.Full, "services", res.Services, "ops", res.Ops, "took", res.Duration)
	}
}
