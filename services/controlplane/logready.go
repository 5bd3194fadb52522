package controlplane

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/events/publish"
)

// DefaultMaxPublishLag is how old the oldest write not yet on the log may
// be while the log still counts as ready.
const DefaultMaxPublishLag = 2 * time.Second

// Errors of the log's readiness check, matched with errors.Is.
var (
	// ErrNoPublisher: no publisher holds the election, or the key that
	// leads is this server's own identity's, left by a dead predecessor
	// (or a session just lost) while this server's publisher does not lead.
	ErrNoPublisher = errors.New("controlplane: no publisher elected")
	// ErrPublishLag: the oldest write not yet on the log is older than the
	// bound.
	ErrPublishLag = errors.New("controlplane: publish lag above bound")
)

// LogCheck tells whether the log is live: a publisher is elected somewhere
// (in this process or another) and the publish lag is below MaxLag. The lag
// is the age of the oldest apiserver write (WriteMeta.Time) after the log's
// last revision, 0 when the log holds etcd's last write. Check is safe for
// concurrent use.
type LogCheck struct {
	Etcd      *clientv3.Client
	JS        jetstream.JetStream
	Publisher *publish.Publisher // this process's: its identity and prefix
	MaxLag    time.Duration      // 0 means DefaultMaxPublishLag
}

// LogState is what one check found.
type LogState struct {
	Leader string          // the identity whose key leads the election
	Local  bool            // this process's publisher leads
	Log    events.Revision // the log's last revision
	Head   events.Revision // etcd's last apiserver write
	Lag    time.Duration
}

// Check returns the state and nil when the log is ready, or an error that
// wraps ErrNoPublisher or ErrPublishLag (or the etcd or NATS failure).
func (c *LogCheck) Check(ctx context.Context) (LogState, error) {
	var st LogState
	maxLag := c.MaxLag
	if maxLag <= 0 {
		maxLag = DefaultMaxPublishLag
	}
	resp, err := c.Etcd.Get(ctx, c.Publisher.ElectionPrefix()+"/", clientv3.WithFirstCreate()...)
	if err != nil {
		return st, fmt.Errorf("controlplane: read the publisher election: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return st, ErrNoPublisher
	}
	st.Leader = string(resp.Kvs[0].Value)
	st.Local = c.Publisher.IsLeader()
	if st.Leader == c.Publisher.Identity() && !st.Local {
		return st, fmt.Errorf("%w: the leading key is this server's (%s) but its publisher does not lead", ErrNoPublisher, st.Leader)
	}
	head, err := c.Etcd.Get(ctx, events.MetaKey)
	if err != nil {
		return st, fmt.Errorf("controlplane: read etcd's last write: %w", err)
	}
	if len(head.Kvs) > 0 {
		st.Head = events.Revision(head.Kvs[0].ModRevision)
	}
	if st.Log, err = events.LastPublishedRevision(ctx, c.JS); err != nil {
		return st, fmt.Errorf("controlplane: read the log's tail: %w", err)
	}
	if st.Log < st.Head {
		if st.Lag, err = c.oldestUnpublished(ctx, st.Log); err != nil {
			return st, err
		}
		if st.Lag > maxLag {
			return st, fmt.Errorf("%w: the log is at revision %d, etcd at %d, its oldest write not on the log is %v old (bound %v; publisher %s)",
				ErrPublishLag, st.Log, st.Head, st.Lag.Round(time.Millisecond), maxLag, st.Leader)
		}
	}
	return st, nil
}

// oldestUnpublished is the age of the first apiserver write after revision
// log: the first change of MetaKey after it. Compaction never passes the
// log's last revision, so that history is there.
func (c *LogCheck) oldestUnpublished(ctx context.Context, log events.Revision) (time.Duration, error) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wch := c.Etcd.Watch(wctx, events.MetaKey, clientv3.WithRev(int64(log)+1))
	for {
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("controlplane: read the oldest write not on the log: %w", ctx.Err())
		case resp, ok := <-wch:
			if !ok {
				return 0, errors.New("controlplane: read the oldest write not on the log: watch closed")
			}
			if err := resp.Err(); err != nil {
				return 0, fmt.Errorf("controlplane: read the oldest write not on the log: %w", err)
			}
			for _, ev := range resp.Events {
				var m events.WriteMeta
				if err := json.Unmarshal(ev.Kv.Value, &m); err != nil {
					return 0, fmt.Errorf("controlplane: write meta at revision %d: %w", ev.Kv.ModRevision, err)
				}
				return max(time.Since(m.Time), 0), nil
			}
		}
	}
}

// ErrBehind: the check passed but the log does not hold etcd's last write
// yet (WaitCaughtUp goes on waiting).
var ErrBehind = errors.New("controlplane: the log is behind etcd")

// WaitCaughtUp polls Check every interval until it passes with the log
// holding etcd's last apiserver write, or ctx is done, and returns the state
// that passed. That proves more than Check: whoever leads has published
// what was written before the call (a live leader that does not publish
// passes Check until the oldest waiting write is MaxLag old). onWait, if
// set, is called with each failure.
func (c *LogCheck) WaitCaughtUp(ctx context.Context, interval time.Duration, onWait func(error)) (LogState, error) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		st, err := c.Check(cctx)
		cancel()
		if err == nil && st.Log >= st.Head {
			return st, nil
		}
		if err == nil {
			err = fmt.Errorf("%w: at revision %d, etcd at %d", ErrBehind, st.Log, st.Head)
		}
		if onWait != nil && ctx.Err() == nil {
			onWait(err)
		}
		select {
		case <-ctx.Done():
			return st, ctx.Err()
		case <-t.C:
		}
	}
}
