package publish

import (
	"github.com/cairn-dev/cairn/events"

	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// CompactorConfig configures a Compactor. The zero value is usable.
type CompactorConfig struct {
	// Interval between compactions, and the history kept: default 5m.
	Interval time.Duration
	// ElectionPrefix is the etcd prefix of the compactors' election; default
	// "/cairn/election/compactor".
	ElectionPrefix string
	// SessionTTL of the leader's etcd session; default DefaultSessionTTL.
	SessionTTL time.Duration
	// Identity is the candidate's name, as PublisherConfig.Identity.
	Identity string
}

// DefaultCompactorElection is the etcd prefix the compactors campaign on.
const DefaultCompactorElection = "/cairn/election/compactor"

// Compactor compacts etcd behind the log. Every Interval it compacts to the
// last published revision it observed one Interval earlier, minus one, so
//
//   - compaction never passes the last published revision: the publisher can
//     always resume, with the previous values it needs for deletes; and
//   - lists and continue tokens keep at least one Interval of history.
//
// Any number may run; they elect one leader and only the leader compacts.
type Compactor struct {
	cli *clientv3.Client
	js  jetstream.JetStream
	cfg CompactorConfig
	log *slog.Logger
}

// NewCompactor returns a compactor; it does nothing until Run.
func NewCompactor(cli *clientv3.Client, js jetstream.JetStream, cfg CompactorConfig, log *slog.Logger) *Compactor {
	if cfg.Interval <= 0 {
		cfg.Interval = 5 * time.Minute
	}
	if cfg.ElectionPrefix == "" {
		cfg.ElectionPrefix = DefaultCompactorElection
	}
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = DefaultSessionTTL
	}
	if cfg.Identity == "" {
		cfg.Identity = uniqueIdentity()
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Compactor{cli: cli, js: js, cfg: cfg, log: log.With("component", "compactor")}
}

// Run campaigns and compacts while leader until ctx is done, then returns
// nil. Errors are logged and retried.
func (c *Compactor) Run(ctx context.Context) error {
	retry(ctx, c.log, "compactor: term ended", c.term)
	return nil
}

func (c *Compactor) term(ctx context.Context) error {
	sess, _, err := campaign(ctx, c.cli, c.cfg.SessionTTL, c.cfg.ElectionPrefix, c.cfg.Identity)
	if err != nil {
		return err
	}
	defer sess.Close()
	c.log.Info("compactor: elected leader")
	tick := time.NewTicker(c.cfg.Interval)
	defer tick.Stop()
	// observed is the last published revision seen at the previous tick.
	observed, err := events.LastPublishedRevision(ctx, c.js)
	if err != nil {
		return err
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-sess.Done():
			return errors.New("publish: compactor election session lost")
		case <-tick.C:
		}
		if err := c.compact(ctx, observed-1); err != nil {
			c.log.Warn("compactor: compact", "revision", observed-1, "err", err)
		}
		now, err := events.LastPublishedRevision(ctx, c.js)
		if err != nil {
			c.log.Warn("compactor: read log tail", "err", err)
			continue
		}
		observed = now
	}
}

// compact compacts etcd to rev; compacting to a revision already compacted
// is not an error.
func (c *Compactor) compact(ctx context.Context, rev events.Revision) error {
	if rev <= 1 {
		return nil
	}
	_, err := c.cli.Compact(ctx, int64(rev))
	if errors.Is(err, rpctypes.ErrCompacted) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("publish: compact to %d: %w", rev, err)
	}
	c.log.Info("compactor: compacted", "revision", rev)
	return nil
}
