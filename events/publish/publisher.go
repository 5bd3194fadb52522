package publish

import (
	"github.com/cairn-dev/cairn/events"

	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// PublisherConfig configures a Publisher. The zero value is usable.
type PublisherConfig struct {
	// ElectionPrefix is the etcd prefix of the leader election; default
	// "/cairn/election/publisher".
	ElectionPrefix string
	// SessionTTL is the lease of the leader's etcd session: how long a dead
	// leader blocks the next one. Default DefaultSessionTTL; whole seconds,
	// at least 1s.
	SessionTTL time.Duration
	// ElectionClient, if set, carries the election (the session's lease
	// keep-alives, the campaign, the watch on the leader key) on a
	// connection of its own, so that keep-alives do not queue behind the
	// publisher's and the apiserver's bulk traffic on the main client.
	// nil uses the main client.
	ElectionClient *clientv3.Client
	// Identity is the candidate's name in the election, unique among the
	// live publishers and stable across restarts of one server (cairn up
	// keeps it in its data directory): a publisher takes over at once the
	// election key its identity left under a dead session, instead of
	// waiting SessionTTL for it to expire. Default "<hostname>/<pid>/<random>",
	// unique to this Publisher, which never takes over.
	Identity string
	// MaxInFlight bounds the unacknowledged publishes; default 256.
	MaxInFlight int
	// AckTimeout bounds the wait for one publish acknowledgement; default 10s.
	AckTimeout time.Duration
	// Registerer receives the publisher's metrics; nil registers none.
	Registerer prometheus.Registerer
}

// DefaultPublisherElection is the etcd prefix the publishers campaign on.
const DefaultPublisherElection = "/cairn/election/publisher"

// DefaultSessionTTL is the default lease of the publisher's and the
// compactor's election sessions: kube's leader-election lease duration
// (15 s). The session renews it every third of that (etcd's client), so a
// saturated machine has to delay two keep-alives by seconds before the
// leader loses its role. A longer lease costs nothing while the leader
// lives: a restarted server of the same Identity takes its own key over at
// once (takeOver); only a dead leader of another identity blocks the next
// one for this long.
const DefaultSessionTTL = 15 * time.Second

func (c PublisherConfig) withDefaults() PublisherConfig {
	if c.ElectionPrefix == "" {
		c.ElectionPrefix = DefaultPublisherElection
	}
	if c.SessionTTL <= 0 {
		c.SessionTTL = DefaultSessionTTL
	}
	if c.Identity == "" {
		c.Identity = uniqueIdentity()
	}
	if c.MaxInFlight <= 0 {
		c.MaxInFlight = 256
	}
	if c.AckTimeout <= 0 {
		c.AckTimeout = 10 * time.Second
	}
	return c
}

// Publisher tails etcd and publishes every committed change to an API object
// to the log, exactly once and in commit order. Run any number of them: they
// elect one leader, and only the leader publishes. See the package
// documentation for the mechanism.
type Publisher struct {
	cli     *clientv3.Client
	js      jetstream.JetStream
	cfg     PublisherConfig
	log     *slog.Logger
	metrics *publisherMetrics

	last   atomic.Int64
	leader atomic.Bool
}

// NewPublisher returns a publisher; it does nothing until Run. The streams
// must exist (events.EnsureStreams).
func NewPublisher(cli *clientv3.Client, js jetstream.JetStream, cfg PublisherConfig, log *slog.Logger) *Publisher {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg = cfg.withDefaults()
	return &Publisher{
		cli:     cli,
		js:      js,
		cfg:     cfg,
		log:     log.With("component", "publisher", "identity", cfg.Identity),
		metrics: newPublisherMetrics(cfg.Registerer),
	}
}

// LastPublished is the revision of the newest event this publisher knows to
// be on the log: acknowledged by JetStream, or found there when it became
// leader. It is 0 until then, and stays at its last value after leadership
// is lost. Safe for concurrent use.
func (p *Publisher) LastPublished() events.Revision { return events.Revision(p.last.Load()) }

// Identity is the publisher's name in the election (PublisherConfig.Identity
// or its default).
func (p *Publisher) Identity() string { return p.cfg.Identity }

// ElectionPrefix is the etcd prefix the publisher campaigns on.
func (p *Publisher) ElectionPrefix() string { return p.cfg.ElectionPrefix }

// IsLeader reports whether this publisher currently holds the election.
func (p *Publisher) IsLeader() bool { return p.leader.Load() }

func (p *Publisher) setLast(r events.Revision) {
	for {
		cur := p.last.Load()
		if int64(r) <= cur {
			return
		}
		if p.last.CompareAndSwap(cur, int64(r)) {
			p.metrics.last.Set(float64(r))
			return
		}
	}
}

// Run campaigns for leadership and publishes while leader, until ctx is
// done; then it resigns, waits for its in-flight publishes and returns nil.
// Errors (etcd or NATS unavailable, a rejected publish, lost leadership) are
// logged and retried: the publisher re-derives its events.Position from the log.
func (p *Publisher) Run(ctx context.Context) error {
	retry(ctx, p.log, "publisher: leadership term ended", p.term)
	return nil
}

// term is one campaign and, if won, one term as leader.
func (p *Publisher) term(ctx context.Context) error {
	sess, el, err := campaign(ctx, p.electionClient(), p.cfg.SessionTTL, p.cfg.ElectionPrefix, p.cfg.Identity)
	if err != nil {
		return err
	}
	p.metrics.elected.Inc()
	defer sess.Close()
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		p.watchTerm(lctx, sess, el)
		cancel()
	}()
	p.leader.Store(true)
	p.log.Info("publisher: elected leader")
	err = p.lead(lctx)
	p.leader.Store(false)
	cancel()
	<-stopped
	if ctx.Err() == nil {
		p.metrics.termsLost.Inc()
		return errors.New("publish: leadership lost")
	}
	return err
}

func (p *Publisher) electionClient() *clientv3.Client {
	if p.cfg.ElectionClient != nil {
		return p.cfg.ElectionClient
	}
	return p.cli
}

// watchTerm returns when ctx is done or the term ends: the session expired,
// or the leader key was deleted (lease revoked, resigned by an operator).
// The keep-alive notices an expired lease only on its next renewal; the
// watch on the key notices a revoked one at once.
func (p *Publisher) watchTerm(ctx context.Context, sess *concurrency.Session, el *concurrency.Election) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var opts []clientv3.OpOption
	if h := el.Header(); h != nil {
		opts = append(opts, clientv3.WithRev(h.Revision+1))
	}
	wch := p.electionClient().Watch(wctx, el.Key(), opts...)
	for {
		select {
		case <-ctx.Done():
			return
		case <-sess.Done():
			p.log.Warn("publisher: election session lost")
			return
		case resp, ok := <-wch:
			if !ok {
				if ctx.Err() == nil {
					p.log.Warn("publisher: watch on the leader key closed")
				}
				return
			}
			for _, ev := range resp.Events {
				if ev.Type == clientv3.EventTypeDelete {
					p.log.Warn("publisher: leader key deleted")
					return
				}
			}
			if resp.Err() != nil {
				p.log.Warn("publisher: watch on the leader key", "err", resp.Err())
				return
			}
		}
	}
}

// lead publishes until ctx is done, restarting from the log's tail after
// every failure.
func (p *Publisher) lead(ctx context.Context) error {
	retry(ctx, p.log, "publisher: restarting from the log tail", p.publishFromTail)
	return ctx.Err()
}

type publisherMetrics struct {
	lag       prometheus.Histogram
	last      prometheus.Gauge
	published *prometheus.CounterVec
	retries   prometheus.Counter
	elected   prometheus.Counter
	termsLost prometheus.Counter
}

func newPublisherMetrics(reg prometheus.Registerer) *publisherMetrics {
	m := &publisherMetrics{
		lag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "cairn_log_publish_lag_seconds",
			Help:    "Time from the apiserver's write (events.WriteMeta.Time) to the event's acknowledgement by JetStream.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}),
		last: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "cairn_log_last_published_revision",
			Help: "The etcd revision of the newest event known to be on the log.",
		}),
		published: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cairn_log_events_published_total",
			Help: "Events published and acknowledged, by stream.",
		}, []string{"stream"}),
		retries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cairn_log_publish_retries_total",
			Help: "Publishes sent again with the same Nats-Msg-Id after an unknown outcome (no acknowledgement) or a failed fence.",
		}),
		elected: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cairn_log_publisher_leader_elections_total",
			Help: "Terms this process's publishers won in the publisher election (every one after the first is a leadership change).",
		}),
		termsLost: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cairn_log_publisher_terms_lost_total",
			Help: "Terms that ended while the publisher still ran: session expired, leader key deleted, or publishing failed.",
		}),
	}
	if reg != nil {
		m.lag = register(reg, m.lag)
		m.last = register(reg, m.last)
		m.published = register(reg, m.published)
		m.retries = register(reg, m.retries)
		m.elected = register(reg, m.elected)
		m.termsLost = register(reg, m.termsLost)
	}
	return m
}

// register registers c, or returns the collector already registered under
// its name (a second Publisher in the same process).
func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
	}
	return c
}
