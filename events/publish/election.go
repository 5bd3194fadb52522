package publish

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// The publisher and the compactor each run one leader at a time, elected in
// etcd: a term begins when a replica wins the campaign and ends when its
// session expires, it loses leadership or its work fails; the replica then
// campaigns again after a back-off.

// retry calls fn until ctx is done, sleeping between calls with a
// back-off that restarts after a call that lasted 10 s or more. Each
// return of fn is logged as msg with its error.
func retry(ctx context.Context, log *slog.Logger, msg string, fn func(context.Context) error) {
	b := newBackoff()
	for {
		start := time.Now()
		err := fn(ctx)
		if ctx.Err() != nil {
			return
		}
		if time.Since(start) > 10*time.Second {
			b.reset()
		}
		log.Warn(msg, "err", err)
		if !b.sleep(ctx) {
			return
		}
	}
}

// campaign opens an etcd session with a lease of ttl (rounded up to whole
// seconds) and campaigns as identity under prefix; it returns once elected.
// The session outlives ctx so that closing it, which the caller does,
// revokes the lease and hands leadership over at once even after ctx is
// done.
func campaign(ctx context.Context, cli *clientv3.Client, ttl time.Duration, prefix, identity string) (*concurrency.Session, *concurrency.Election, error) {
	secs := int((ttl + time.Second - 1) / time.Second)
	lease, err := cli.Grant(ctx, int64(secs))
	if err != nil {
		return nil, nil, fmt.Errorf("events: grant election lease: %w", err)
	}
	sess, err := concurrency.NewSession(cli, concurrency.WithLease(lease.ID),
		concurrency.WithTTL(secs), concurrency.WithContext(context.WithoutCancel(ctx)))
	if err != nil {
		return nil, nil, fmt.Errorf("events: election session: %w", err)
	}
	el := concurrency.NewElection(sess, prefix)
	if err := el.Campaign(ctx, identity); err != nil {
		sess.Close()
		return nil, nil, fmt.Errorf("events: campaign: %w", err)
	}
	return sess, el, nil
}

// backoff is the delay between retries: 50 ms doubling to 5 s.
type backoff struct{ d time.Duration }

func newBackoff() *backoff { return &backoff{d: 50 * time.Millisecond} }

func (b *backoff) reset() { b.d = 50 * time.Millisecond }

// sleep waits for the current delay and doubles it; false if ctx ended.
func (b *backoff) sleep(ctx context.Context) bool {
	t := time.NewTimer(b.d)
	defer t.Stop()
	b.d = min(2*b.d, 5*time.Second)
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
