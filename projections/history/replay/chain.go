package replay

import (
	"context"
	"errors"
	"fmt"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cairn-dev/cairn/events"
)

// ErrDiverged means the destination etcd did not commit a revision where
// the log has it: something else wrote to it during the replay.
var ErrDiverged = errors.New("replay: destination etcd diverged from the log")

// window is how many transactions are in flight at once. etcd batches the
// proposals in flight into one raft round, so the window, not the round
// trip, bounds the rate.
const window = 64

// txn is one revision of the destination: the writes of one logged
// revision and its events.WriteMeta under events.MetaKey, or a pad (a put
// of PadKey) for a revision the log has no event for.
type txn struct {
	rev  int64
	pad  bool
	ops  []clientv3.Op
	cmps []clientv3.Cmp
	msgs []*srcMsg // the logged events of the revision, in order

	done chan struct{}
	ok   bool // committed at rev
	err  error
}

// chain commits transactions in revision order, with up to window of them
// in flight.
//
// Every transaction writes MetaKey or PadKey, and is conditioned on the
// mod revisions both keys have after its predecessor. A transaction etcd
// applies before its predecessor therefore fails its compare and changes
// nothing, instead of landing one revision early: nothing shifts. The
// chain then waits for what is in flight, commits the failed transaction
// alone and sends the rest again. A transaction that succeeds is checked
// to have committed at its revision.
type chain struct {
	cli      *clientv3.Client
	meta     int64 // mod revision of MetaKey after the last transaction queued
	pad      int64 // mod revision of PadKey after the last transaction queued
	inflight []*txn
	work     chan *txn     // to the workers
	started  chan struct{} // a worker has taken a transaction
	workers  sync.WaitGroup
	// landed is called for each committed transaction, in order.
	landed func(context.Context, *txn) error
	// reordered counts the transactions etcd applied before their
	// predecessor.
	reordered int
}

// newChain starts a chain on the destination's client, after its current
// revision, which it returns. Close it to stop its workers.
func newChain(ctx context.Context, cli *clientv3.Client, landed func(context.Context, *txn) error) (*chain, events.Revision, error) {
	resp, err := cli.Txn(ctx).Then(clientv3.OpGet(events.MetaKey), clientv3.OpGet(PadKey)).Commit()
	if err != nil {
		return nil, 0, fmt.Errorf("replay: etcd: %w", err)
	}
	c := &chain{cli: cli, landed: landed, work: make(chan *txn), started: make(chan struct{})}
	for i, p := range []*int64{&c.meta, &c.pad} {
		if kvs := resp.Responses[i].GetResponseRange().Kvs; len(kvs) > 0 {
			*p = kvs[0].ModRevision
		}
	}
	for range window {
		c.workers.Go(func() { c.worker(ctx) })
	}
	return c, events.Revision(resp.Header.Revision), nil
}

// push queues t, the transaction of the revision after the last one
// queued.
func (c *chain) push(ctx context.Context, t *txn) error {
	c.link(t)
	for len(c.inflight) >= window {
		if err := c.complete(ctx); err != nil {
			return err
		}
	}
	c.submit(t)
	return nil
}

// link conditions t on the revision before it.
func (c *chain) link(t *txn) {
	t.cmps = []clientv3.Cmp{
		clientv3.Compare(clientv3.ModRevision(events.MetaKey), "=", c.meta),
		clientv3.Compare(clientv3.ModRevision(PadKey), "=", c.pad),
	}
	if t.pad {
		c.pad = t.rev
	} else {
		c.meta = t.rev
	}
}

// flush completes every transaction in flight.
func (c *chain) flush(ctx context.Context) error {
	for len(c.inflight) > 0 {
		if err := c.complete(ctx); err != nil {
			return err
		}
	}
	return nil
}

// close waits for the transactions still in flight (after an error) and
// stops the workers.
func (c *chain) close() {
	close(c.work)
	c.workers.Wait()
	c.inflight = nil
}

// submit hands t to a free worker and returns once the worker has taken
// it. Without that handshake a burst of submits would wake the workers
// newest first (a goroutine made runnable runs before those already
// waiting), and most transactions would reach etcd out of order.
func (c *chain) submit(t *txn) {
	t.done, t.ok, t.err = make(chan struct{}), false, nil
	c.inflight = append(c.inflight, t)
	c.work <- t
	<-c.started
}

// worker commits the transactions it is handed until work is closed.
func (c *chain) worker(ctx context.Context) {
	for t := range c.work {
		c.started <- struct{}{}
		t.ok, t.err = c.commit(ctx, t)
		close(t.done)
	}
}

func (c *chain) commit(ctx context.Context, t *txn) (bool, error) {
	resp, err := c.cli.Txn(ctx).If(t.cmps...).Then(t.ops...).Commit()
	if err != nil {
		return false, fmt.Errorf("replay: revision %d: %w", t.rev, err)
	}
	if !resp.Succeeded {
		return false, nil
	}
	if resp.Header.Revision != t.rev {
		return false, fmt.Errorf("%w: revision %d committed at %d", ErrDiverged, t.rev, resp.Header.Revision)
	}
	return true, nil
}

// complete waits for the oldest transaction in flight and lands it. If
// etcd applied it before its predecessor, everything after it failed too:
// it waits for them, commits the oldest alone (its predecessor has
// landed, so only a foreign write can make it fail now) and sends the
// rest again.
func (c *chain) complete(ctx context.Context) error {
	t := c.inflight[0]
	<-t.done
	if t.err != nil {
		return t.err
	}
	c.inflight = c.inflight[1:]
	if t.ok {
		return c.landed(ctx, t)
	}
	rest := c.inflight
	c.inflight = nil
	for _, r := range rest {
		<-r.done
		if r.err == nil && r.ok {
			r.err = fmt.Errorf("%w: revision %d committed before revision %d", ErrDiverged, r.rev, t.rev)
		}
		if r.err != nil {
			return r.err
		}
	}
	c.reordered++
	ok, err := c.commit(ctx, t)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: revision %d: the destination changed underneath", ErrDiverged, t.rev)
	}
	if err := c.landed(ctx, t); err != nil {
		return err
	}
	for _, r := range rest {
		c.submit(r)
	}
	return nil
}
