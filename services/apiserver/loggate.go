package apiserver

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/services/apiserver/watchhub"
)

// Backpressure from the log to the writes. etcd takes writes faster than
// the publisher moves them to the log when both share saturated cores, so
// without a bound the log falls seconds behind etcd and every consumer
// (controllers, scheduler, kubelets, watches) acts on a past that grows
// through the load. The gate holds a write, before any of its work, while
// the oldest write this apiserver committed that its watch hub has not
// yet seen on the log is older than the bound (Config.LogBackpressure):
// writes then go at the log's pace, and the lag stays near the bound.
//
// Two things are never held. Leases and Nodes (heartbeats, leader
// election, node status: what keeps the components' seats) pass, as
// APF's leader-election and node-high levels keep their share. And a log
// that does not move at all (a publisher failing over, NATS down) opens
// the gate once it has stood still for logStall: writes then go on to
// etcd as before, to be published when the log is back, instead of
// stalling behind it. One write is held at most maxHold.
type logGate struct {
	hub    *watchhub.Hub
	maxLag time.Duration
	now    func() time.Time

	mu sync.Mutex
	// pending are this apiserver's commits the hub had not seen when
	// last looked, oldest first (commits finish in about revision order;
	// one that finishes late waits behind a later one, which only makes
	// the gate lift a moment later). At most maxPending are kept: beyond
	// that the gate is closed anyway, and the oldest decide the age.
	pending []pendingCommit
	head    events.Revision // the hub's head when last looked
	moved   time.Time       // when the head last moved (or pending became non-empty)

	held    prometheus.Histogram
	holding prometheus.Gauge
}

type pendingCommit struct {
	rev events.Revision
	at  time.Time
}

const (
	// DefaultLogBackpressure is Config.LogBackpressure's default.
	DefaultLogBackpressure = 100 * time.Millisecond
	logStall               = time.Second
	maxHold                = 5 * time.Second
	maxPending             = 1 << 16
)

// newLogGate returns the gate of maxLag on hub; nil (never holds) for
// maxLag < 0.
func newLogGate(hub *watchhub.Hub, maxLag time.Duration, now func() time.Time, reg prometheus.Registerer) (*logGate, error) {
	if maxLag < 0 {
		return nil, nil
	}
	if maxLag == 0 {
		maxLag = DefaultLogBackpressure
	}
	g := &logGate{hub: hub, maxLag: maxLag, now: now,
		held: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "cairn_apiserver_log_backpressure_seconds",
			Help: "How long writes were held because the log was further behind etcd than --log-backpressure; " +
				"writes not held are not observed.",
			Buckets: []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5},
		}),
		holding: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "cairn_apiserver_log_backpressure_holding",
			Help: "Writes held now because the log is further behind etcd than --log-backpressure.",
		})}
	for _, c := range []prometheus.Collector{g.held, g.holding} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("apiserver: register log gate metrics: %w", err)
		}
	}
	return g, nil
}

// committed notes a commit of key at rev (storage.Store.OnCommit). Only
// writes to the main stream count: leases go to a stream of their own.
func (g *logGate) committed(key string, rev events.Revision) {
	group, resource, _, _, ok := events.ParseRegistryKey(key)
	if !ok || events.IsLease(group, resource) {
		return
	}
	now := g.now()
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.pending) == 0 {
		g.moved = now
	}
	if len(g.pending) < maxPending {
		g.pending = append(g.pending, pendingCommit{rev: rev, at: now})
	}
}

// exempt says whether a request is never held.
func exempt(info requestInfo) bool {
	switch info.Verb {
	case "create", "update", "patch", "delete", "deletecollection":
	default:
		return true
	}
	return events.IsLease(info.APIGroup, info.Resource) || info.APIGroup == "" && info.Resource == "nodes"
}

// wait holds a write while the log is more than maxLag behind this
// apiserver's writes (see logGate).
func (g *logGate) wait(ctx context.Context) {
	if g == nil {
		return
	}
	var start time.Time
	for {
		rev, behind := g.behind()
		if !behind {
			break
		}
		now := g.now()
		if start.IsZero() {
			start = now
			g.holding.Inc()
			defer g.holding.Dec()
		} else if now.Sub(start) >= maxHold {
			break
		}
		wctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
		_ = g.hub.WaitFor(wctx, events.Stream, rev)
		cancel()
		if ctx.Err() != nil {
			break
		}
	}
	if !start.IsZero() {
		g.held.Observe(g.now().Sub(start).Seconds())
	}
}

// behind drops the pending commits the hub has seen and says whether the
// oldest left is older than maxLag on a log that moves; rev is its
// revision.
func (g *logGate) behind() (rev events.Revision, behind bool) {
	head, err := g.hub.Head(events.Stream)
	if err != nil {
		return 0, false
	}
	now := g.now()
	g.mu.Lock()
	defer g.mu.Unlock()
	if head != g.head {
		g.head, g.moved = head, now
	}
	n := 0
	for n < len(g.pending) && g.pending[n].rev <= head {
		n++
	}
	g.pending = g.pending[n:] // append copies the rest out when it grows
	if len(g.pending) == 0 || now.Sub(g.moved) >= logStall {
		return 0, false
	}
	oldest := g.pending[0]
	return oldest.rev, now.Sub(oldest.at) > g.maxLag
}
