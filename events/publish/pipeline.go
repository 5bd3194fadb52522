package publish

import (
	"github.com/cairn-dev/cairn/events"

	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// errWatchClosed means etcd ended the watch (lost leader, shutdown).
var errWatchClosed = errors.New("publish: etcd watch closed")

// publishFromTail reads where the log ends, watches etcd from there and
// publishes until ctx is done or anything fails. It returns only after every
// publish it made is acknowledged or has failed.
func (p *Publisher) publishFromTail(ctx context.Context) (err error) {
	tail, err := events.ReadLogEnd(ctx, p.js)
	if err != nil {
		return err
	}
	last := tail.Last()
	p.setLast(last.Rev)
	p.log.Info("publisher: resuming", "revision", last.Rev, "index", last.Index,
		"cairnSeq", tail.Streams[events.Stream].Seq, "leaseSeq", tail.Streams[events.LeaseStream].Seq)

	pl := newPipeline(ctx, p, tail)
	defer func() {
		// Wait for every in-flight acknowledgement before anyone re-reads
		// the tail.
		if cerr := pl.close(); err == nil {
			err = cerr
		}
	}()

	// The last revision is read again: a multi-object transaction may have
	// been published only in part.
	start := max(int64(last.Rev), 1)
	for {
		next, err := p.watch(ctx, pl, start, last)
		if err != nil {
			return err
		}
		start = next
	}
}

// watch publishes the changes from revision start on. It returns a new start
// revision if etcd has compacted past start.
func (p *Publisher) watch(ctx context.Context, pl *pipeline, start int64, last events.Position) (int64, error) {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	// No WithPrevKV: it costs etcd a backend read for every change (the
	// metadata key's too). Only deletes need the previous value; fillPrev
	// reads it at rev-1, which compaction never passes (see Compactor).
	wch := p.cli.Watch(wctx, "", clientv3.WithPrefix(), clientv3.WithRev(start))
	for {
		var resp clientv3.WatchResponse
		var ok bool
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-pl.failed:
			return 0, pl.failure()
		case resp, ok = <-wch:
		}
		if !ok {
			return 0, errWatchClosed
		}
		if resp.CompactRevision != 0 {
			// Compaction never passes the last published revision, so this
			// is someone else's compaction: the changes before it are lost.
			if last.Rev > 0 {
				p.log.Error("publisher: etcd compacted past the log; changes are lost",
					"err", events.ErrRevisionGap, "lastPublished", last.Rev, "compactRevision", resp.CompactRevision)
			} else {
				p.log.Warn("publisher: empty log on a compacted etcd; starting at the compact revision",
					"compactRevision", resp.CompactRevision)
			}
			return resp.CompactRevision, nil
		}
		if err := resp.Err(); err != nil {
			return 0, fmt.Errorf("publish: watch: %w", err)
		}
		// etcd never splits the changes of one revision across responses.
		evs := resp.Events
		for len(evs) > 0 {
			rev, one, rest := nextRevision(evs)
			evs = rest
			if err := p.fillPrev(ctx, one); err != nil {
				return 0, err
			}
			msgs, err := buildRevision(rev, one)
			if err != nil {
				return 0, err
			}
			for _, m := range msgs {
				if !last.Less(m.pos) {
					continue
				}
				if err := pl.send(ctx, m); err != nil {
					return 0, err
				}
			}
		}
	}
}

// pipeline publishes events asynchronously, a bounded number in flight, and
// checks every acknowledgement in order. Each publish expects the stream's
// previous sequence, so after a failure every later publish to the same
// stream fails too and the stream never has a hole. Before switching to the
// other stream it waits for all acknowledgements, so the two streams
// together always hold a prefix of the log.
type pipeline struct {
	ctx        context.Context // the term: retries stop when it ends
	p          *Publisher
	seq        map[string]uint64 // last sequence per stream, as the sender expects it
	lastStream string

	slots    chan struct{}
	inflight chan flight
	done     chan struct{}
	failed   chan struct{}

	mu  sync.Mutex
	err error
}

type flight struct {
	m        *outMsg
	fut      jetstream.PubAckFuture
	wantSeq  uint64
	sent     time.Time
	deadline time.Time
	barrier  chan struct{}
}

func newPipeline(ctx context.Context, p *Publisher, tail events.LogEnd) *pipeline {
	pl := &pipeline{
		ctx:      ctx,
		p:        p,
		seq:      map[string]uint64{},
		slots:    make(chan struct{}, p.cfg.MaxInFlight),
		inflight: make(chan flight, p.cfg.MaxInFlight+1),
		done:     make(chan struct{}),
		failed:   make(chan struct{}),
	}
	for name, st := range tail.Streams {
		pl.seq[name] = st.Seq
	}
	go pl.ack()
	return pl
}

func (pl *pipeline) fail(err error) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if pl.err == nil {
		pl.err = err
		close(pl.failed)
	}
}

func (pl *pipeline) failure() error {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	return pl.err
}

// send publishes m. It blocks while MaxInFlight publishes are unacknowledged.
func (pl *pipeline) send(ctx context.Context, m *outMsg) error {
	if pl.lastStream != "" && m.stream != pl.lastStream {
		if err := pl.barrier(ctx); err != nil {
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case pl.slots <- struct{}{}:
	case <-pl.failed:
		return pl.failure()
	case <-ctx.Done():
		return ctx.Err()
	}
	prev := pl.seq[m.stream]
	fut, err := pl.p.js.PublishMsgAsync(m.msg, publishOpts(m, prev)...)
	if err != nil {
		<-pl.slots
		err = fmt.Errorf("publish: publish revision %s: %w", m.pos.MsgID(), err)
		pl.fail(err)
		return err
	}
	pl.seq[m.stream] = prev + 1
	pl.lastStream = m.stream
	now := time.Now()
	pl.inflight <- flight{m: m, fut: fut, wantSeq: prev + 1, sent: now, deadline: now.Add(pl.p.cfg.AckTimeout)}
	return nil
}

// publishOpts are the options of every publish of m, the first and every
// retry alike: its id and the fence, the stream's expected last sequence.
// A stream leader checks the fence before it proposes the message to the
// replicas, and refuses it with "wrong last sequence" when the stream has
// moved on, so a message is stored only right after the message the
// publisher put before it. With two publishers at once (a deposed leader
// still publishing) that is still the right place: both publish the same
// history of etcd in the same order under the same ids, so whatever one of
// them stored at a sequence is what the other would have stored there
// (TestPublisherSplitBrain).
//
// The publisher sends no Nats-Expected-Last-Msg-Id. On a replicated stream
// nats-server (v2.15.2) does not check that header at the leader but on
// every replica as it applies the message, against the replica's own idea
// of its last message id, which a replica that caught up from the leader
// (a new replica after the stream was scaled up, one that fell behind) does
// not have: it finds a mismatch, takes it as a critical write error and
// stops applying; with two such replicas of three the stream has a leader
// and no quorum and accepts nothing until the servers restart
// (TestPublishWhileStreamsScale).
func publishOpts(m *outMsg, prevSeq uint64) []jetstream.PublishOpt {
	return []jetstream.PublishOpt{
		jetstream.WithMsgID(m.pos.MsgID()),
		jetstream.WithExpectStream(m.stream),
		jetstream.WithExpectLastSequence(prevSeq),
	}
}

// barrier waits until every publish so far is acknowledged.
func (pl *pipeline) barrier(ctx context.Context) error {
	b := make(chan struct{})
	pl.inflight <- flight{barrier: b}
	select {
	case <-b:
		return pl.failure()
	case <-pl.failed:
		return pl.failure()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// close stops sending and waits for the outstanding acknowledgements.
func (pl *pipeline) close() error {
	close(pl.inflight)
	<-pl.done
	return pl.failure()
}

// ack checks acknowledgements in publish order.
func (pl *pipeline) ack() {
	defer close(pl.done)
	for f := range pl.inflight {
		if f.barrier != nil {
			close(f.barrier)
			continue
		}
		err := pl.await(f)
		if err != nil && pl.failure() == nil {
			err = pl.retry(f, err)
		}
		<-pl.slots
		if err != nil {
			pl.fail(err)
			continue
		}
		m := f.m
		pl.p.setLast(m.pos.Rev)
		pl.p.metrics.published.WithLabelValues(m.stream).Inc()
		if !m.metaTime.IsZero() {
			pl.p.metrics.lag.Observe(time.Since(m.metaTime).Seconds())
		}
	}
}

func (pl *pipeline) await(f flight) error {
	t := time.NewTimer(time.Until(f.deadline))
	defer t.Stop()
	id := f.m.pos.MsgID()
	select {
	case ack := <-f.fut.Ok():
		return checkAck(f, ack)
	case err := <-f.fut.Err():
		return fmt.Errorf("publish: publish revision %s: %w", id, err)
	case <-t.C:
		return fmt.Errorf("publish: publish revision %s: no acknowledgement in %s", id, pl.p.cfg.AckTimeout)
	}
}

// fillPrev sets PrevKv of the deletes of registry keys among evs (one
// revision's changes) from a read at the revision before.
func (p *Publisher) fillPrev(ctx context.Context, evs []*clientv3.Event) error {
	for _, ev := range evs {
		if ev.Type != mvccpb.DELETE || ev.PrevKv != nil || !strings.HasPrefix(string(ev.Kv.Key), events.RegistryPrefix) {
			continue
		}
		resp, err := p.cli.Get(ctx, string(ev.Kv.Key), clientv3.WithRev(ev.Kv.ModRevision-1))
		if err != nil {
			return fmt.Errorf("publish: last state of %s before %d: %w", ev.Kv.Key, ev.Kv.ModRevision, err)
		}
		if len(resp.Kvs) > 0 {
			ev.PrevKv = resp.Kvs[0]
		}
	}
	return nil
}
