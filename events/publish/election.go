package publish

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"strconv"
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
//
// Before it campaigns it takes over the keys that identity holds under
// other leases (see takeOver): a server restarted after a crash does not
// wait for its own dead predecessor's session to expire, while a candidate
// of any other identity still does.
func campaign(ctx context.Context, cli *clientv3.Client, ttl time.Duration, prefix, identity string) (*concurrency.Session, *concurrency.Election, error) {
	secs := int((ttl + time.Second - 1) / time.Second)
	lease, err := cli.Grant(ctx, int64(secs))
	if err != nil {
		return nil, nil, fmt.Errorf("publish: grant election lease: %w", err)
	}
	sess, err := concurrency.NewSession(cli, concurrency.WithLease(lease.ID),
		concurrency.WithTTL(secs), concurrency.WithContext(context.WithoutCancel(ctx)))
	if err != nil {
		return nil, nil, fmt.Errorf("publish: election session: %w", err)
	}
	if err := takeOver(ctx, cli, prefix, identity, sess.Lease()); err != nil {
		sess.Close()
		return nil, nil, err
	}
	el := concurrency.NewElection(sess, prefix)
	if err := el.Campaign(ctx, identity); err != nil {
		sess.Close()
		return nil, nil, fmt.Errorf("publish: campaign: %w", err)
	}
	return sess, el, nil
}

// takeOver deletes every candidate key under prefix whose value is identity
// and whose lease is not own: keys left by an earlier process of the same
// identity, which is dead (identities are unique among live candidates; a
// server's is stable across its restarts). Each delete is one transaction
// that applies only if the key still is the one read, with the same value,
// so a key re-created meanwhile is never touched. The keys of other
// identities are left to expire with their leases.
func takeOver(ctx context.Context, cli *clientv3.Client, prefix, identity string, own clientv3.LeaseID) error {
	resp, err := cli.Get(ctx, prefix+"/", clientv3.WithPrefix())
	if err != nil {
		return fmt.Errorf("publish: read election %s: %w", prefix, err)
	}
	for _, kv := range resp.Kvs {
		if string(kv.Value) != identity || clientv3.LeaseID(kv.Lease) == own {
			continue
		}
		key := string(kv.Key)
		_, err := cli.Txn(ctx).If(
			clientv3.Compare(clientv3.CreateRevision(key), "=", kv.CreateRevision),
			clientv3.Compare(clientv3.Value(key), "=", identity),
		).Then(clientv3.OpDelete(key)).Commit()
		if err != nil {
			return fmt.Errorf("publish: take over election key %s: %w", key, err)
		}
	}
	return nil
}

// uniqueIdentity is the default candidate name, "<hostname>/<pid>/<random>":
// unique to one Publisher or Compactor, so it never takes over another's
// key (two in one process must not depose each other).
func uniqueIdentity() string {
	h, _ := os.Hostname()
	var b [4]byte
	_, _ = rand.Read(b[:])
	return h + "/" + strconv.Itoa(os.Getpid()) + "/" + hex.EncodeToString(b[:])
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
