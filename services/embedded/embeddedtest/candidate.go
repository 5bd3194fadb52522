package embeddedtest

import (
	"context"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// Candidate stands in for another server in an etcd election of
// go.etcd.io/etcd/client/v3/concurrency (the log publisher's, the
// compactor's): on a client of its own it holds a candidate key with its
// identity as value, under a lease it keeps alive, and does nothing else.
type Candidate struct {
	cli  *clientv3.Client
	sess *concurrency.Session
	// Key is its candidate key, prefix/<lease id in hex>, as Campaign
	// makes it.
	Key string
}

// StartCandidate joins the election at prefix on the etcd at endpoint as
// identity, with a session of ttl (whole seconds), and returns at once: the
// candidate leads if no key under prefix is older than its own, else it
// waits in line. The test's cleanup resigns it.
func StartCandidate(t testing.TB, endpoint, prefix, identity string, ttl time.Duration) *Candidate {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 10 * time.Second, Logger: nopZap()})
	if err != nil {
		t.Fatal(err)
	}
	sess, err := concurrency.NewSession(cli, concurrency.WithTTL(int(ttl/time.Second)))
	if err != nil {
		cli.Close()
		t.Fatal(err)
	}
	c := &Candidate{cli: cli, sess: sess, Key: fmt.Sprintf("%s/%x", prefix, sess.Lease())}
	t.Cleanup(c.Resign)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(c.Key), "=", 0)).
		Then(clientv3.OpPut(c.Key, identity, clientv3.WithLease(sess.Lease()))).Commit(); err != nil {
		t.Fatal(err)
	}
	return c
}

// Abandon renews the lease once more and drops the client without
// revoking it, as a process killed with SIGKILL does: the key stays for
// the whole ttl from now. It returns the moment of the renewal.
func (c *Candidate) Abandon(t testing.TB) time.Time {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.cli.KeepAliveOnce(ctx, c.sess.Lease()); err != nil {
		t.Fatal(err)
	}
	at := time.Now()
	_ = c.cli.Close()
	return at
}

// Resign revokes the candidate's lease, deleting its key, and closes its
// client; after Abandon it does nothing. It is idempotent.
func (c *Candidate) Resign() {
	_ = c.sess.Close()
	_ = c.cli.Close()
}
