package store

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/klauspost/compress/s2"
	"github.com/nats-io/nats.go/jetstream"
	bolt "go.etcd.io/bbolt"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/schemas/codec"
)

// Indexed is one event as ingest stores it, handed to observers.
type Indexed struct {
	Pos   Pos
	Seq   uint64
	Event *events.Event

	raw []byte // the message as published
}

// Observer sees every event ingest stores, in log order, inside the write
// transaction of its batch (tx reads see the batch's earlier events).
// Observe must not fail; it is called again for events of a batch that is
// retried after a failed commit.
type Observer interface {
	Observe(tx *Tx, ev *Indexed)
}

// IngestConfig configures an Ingester.
type IngestConfig struct {
	// Stream is the log to read; default events.Stream (CAIRN). Leases
	// (CAIRN_LEASES) are heartbeats and stay out of the history.
	Stream string
	// BatchSize is the most events written in one transaction; default
	// 1000. A batch is also written once the consumer has caught up, and
	// no sooner than Linger after the previous write.
	BatchSize int
	// Linger is how long after the previous write a batch that has caught
	// up with the log waits for more events: while events trickle in one
	// by one, the store commits (and syncs) at most once per Linger
	// instead of once per event, and an event after a quiet spell is
	// written at once. Default 20ms; negative: write as soon as caught up.
	Linger time.Duration
	// Observers see every stored event (metrics).
	Observers []Observer
	Log       *slog.Logger
}

// Ingester feeds a Store from the log.
type Ingester struct {
	st  *Store
	js  jetstream.JetStream
	cfg IngestConfig
	log *slog.Logger
}

// NewIngester returns an ingester; it does nothing until Run.
func NewIngester(st *Store, js jetstream.JetStream, cfg IngestConfig) *Ingester {
	if cfg.Stream == "" {
		cfg.Stream = events.Stream
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = 1000
	}
	if cfg.Linger == 0 {
		cfg.Linger = 20 * time.Millisecond
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Ingester{st: st, js: js, cfg: cfg, log: cfg.Log.With("component", "history")}
}

// Run consumes the log from the event after the last one stored, in
// batches, until ctx is done; then it returns nil. Errors (NATS
// unavailable, a failed commit) are logged and retried from the store's
// progress, so no event is skipped or stored twice.
func (in *Ingester) Run(ctx context.Context) error {
	delay := 50 * time.Millisecond
	for {
		err := in.consume(ctx)
		if ctx.Err() != nil {
			return nil
		}
		in.log.Warn("history: ingest restarting", "err", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(delay):
		}
		delay = min(2*delay, 5*time.Second)
	}
}

// CatchUp stores every event on the log now and returns: the projection
// without a running ingester (CLI use, tests).
func (in *Ingester) CatchUp(ctx context.Context) error {
	s, err := in.js.Stream(ctx, in.cfg.Stream)
	if err != nil {
		return fmt.Errorf("history: stream %s: %w", in.cfg.Stream, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		return fmt.Errorf("history: stream %s: %w", in.cfg.Stream, err)
	}
	p, err := in.st.Progress()
	if err != nil {
		return err
	}
	if p.Seq >= info.State.LastSeq {
		return nil
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- in.consume(cctx) }()
	for {
		// Take the channel before reading progress, so a commit in
		// between is not missed.
		changed := in.st.Changed()
		if p, err := in.st.Progress(); err == nil && p.Seq >= info.State.LastSeq {
			cancel()
			<-done
			return nil
		}
		select {
		case err := <-done:
			if err == nil {
				err = errors.New("history: ingest stopped")
			}
			return err
		case <-changed:
		}
	}
}

func (in *Ingester) consume(ctx context.Context) error {
	p, err := in.st.Progress()
	if err != nil {
		return err
	}
	ro := events.ReadOptions{Stream: in.cfg.Stream, Follow: true, Buffer: 2 * in.cfg.BatchSize}
	if p.Seq > 0 {
		ro.FromSeq = p.Seq + 1
	}
	r, err := events.NewReader(ctx, in.js, ro)
	if err != nil {
		return fmt.Errorf("history: %w", err)
	}
	defer r.Stop()
	in.log.Info("history: ingesting", "fromSeq", p.Seq+1, "revision", p.Rev)
	last := p.Seq
	var batch []*Indexed
	var wrote time.Time // of the previous write
	flush := func() error {
		if err := in.st.write(batch, in.cfg.Observers); err != nil {
			return err
		}
		wrote, batch = time.Now(), batch[:0]
		return nil
	}
	caughtUp := false // the batch's last event was the log's last
	for {
		m, err := in.next(ctx, r, caughtUp && len(batch) > 0, wrote)
		if errors.Is(err, errLingered) {
			if err := flush(); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("history: %w", err)
		}
		if m.Seq <= last {
			continue // redelivered after a consumer reset
		}
		ix, err := decodeMessage(m)
		if err != nil {
			return err
		}
		last = ix.Seq
		batch = append(batch, ix)
		caughtUp = m.Pending == 0
		if len(batch) >= in.cfg.BatchSize || caughtUp && time.Since(wrote) >= in.cfg.Linger {
			if err := flush(); err != nil {
				return err
			}
		}
	}
}

// errLingered: a caught-up batch waited its Linger and no event came.
var errLingered = errors.New("history: linger over")

// next reads the next message; with lingering, only until Linger after
// the previous write (then errLingered).
func (in *Ingester) next(ctx context.Context, r *events.Reader, lingering bool, wrote time.Time) (*events.Msg, error) {
	if !lingering {
		return r.Next(ctx)
	}
	wait := time.Until(wrote.Add(in.cfg.Linger))
	if wait <= 0 {
		return nil, errLingered
	}
	lctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	m, err := r.Next(lctx)
	if err != nil && ctx.Err() == nil && lctx.Err() != nil {
		return nil, errLingered
	}
	return m, err
}

// decodeMessage reads one log message. An event that cannot be decoded is
// a defect of the log, not of the projection: it is an error.
func decodeMessage(m *events.Msg) (*Indexed, error) {
	var e events.Event
	if err := codec.Unmarshal(m.Data, &e); err != nil {
		return nil, fmt.Errorf("history: seq %d: %w", m.Seq, err)
	}
	pos := Pos{Rev: e.Revision}
	if id := m.Header.Get(jetstream.MsgIDHeader); id != "" {
		if p, err := ParsePos(id); err == nil {
			pos = p
		}
	}
	return &Indexed{Pos: pos, Seq: m.Seq, Event: &e, raw: m.Data}, nil
}

// write stores a batch in one transaction and records progress.
func (s *Store) write(batch []*Indexed, obs []Observer) error {
	if len(batch) == 0 {
		return nil
	}
	err := s.db.Update(func(btx *bolt.Tx) error {
		w := newWriter(btx)
		tx := &Tx{tx: btx}
		for _, ix := range batch {
			if err := w.put(ix); err != nil {
				return err
			}
			for _, o := range obs {
				o.Observe(tx, ix)
			}
		}
		last := batch[len(batch)-1]
		meta := btx.Bucket(bMeta)
		if err := meta.Put([]byte("seq"), u64(last.Seq)); err != nil {
			return err
		}
		return meta.Put([]byte("rev"), u64(uint64(last.Pos.Rev)))
	})
	if err != nil {
		return fmt.Errorf("history: write batch: %w", err)
	}
	s.notify()
	return nil
}

func u64(v uint64) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint64(b, v)
	return b
}

// writer puts events into the buckets of one transaction.
type writer struct {
	b map[string]*bolt.Bucket
}

func newWriter(tx *bolt.Tx) *writer {
	w := &writer{b: map[string]*bolt.Bucket{}}
	for _, name := range allBuckets {
		b := tx.Bucket(name)
		w.b[string(name)] = b
	}
	// Keys that only grow fill their pages.
	for _, name := range [][]byte{bEvents, bSum, bTime} {
		w.b[string(name)].FillPercent = 0.95
	}
	return w
}

func indexKey(value string, pos []byte) []byte {
	k := make([]byte, 0, len(value)+1+posLen)
	k = append(k, value...)
	k = append(k, 0)
	return append(k, pos...)
}

// compressAbove is the envelope size from which events are stored
// compressed: objects compress well, small envelopes do not pay off.
const compressAbove = 512

func (w *writer) put(ix *Indexed) error {
	e := ix.Event
	pos := ix.Pos.bytes()
	var body []byte
	if len(ix.raw) >= compressAbove {
		body = append([]byte{1}, s2.Encode(nil, ix.raw)...)
	} else {
		body = append([]byte{0}, ix.raw...)
	}
	sum := SummaryOf(ix.Pos, e)
	enc := sum.encode()
	key := KeyOf(e).String()
	nanos := int64(0)
	if !e.Time.IsZero() {
		nanos = e.Time.UnixNano()
	}
	puts := []struct {
		bucket []byte
		k, v   []byte
	}{
		{bEvents, pos, body},
		{bSum, pos, enc},
		{bKey, indexKey(key, pos), []byte{typeCodes[e.Type]}},
		{bTime, append(u64(uint64(nanos)), pos...), nil},
		{bUser, indexKey(e.Actor.User, pos), enc},
	}
	if e.UID != "" {
		puts = append(puts, struct {
			bucket []byte
			k, v   []byte
		}{bUID, indexKey(e.UID, pos), nil}, struct {
			bucket []byte
			k, v   []byte
		}{bUIDKey, []byte(e.UID), []byte(key)})
	}
	for _, p := range puts {
		if err := w.b[string(p.bucket)].Put(p.k, p.v); err != nil {
			return err
		}
	}
	return w.putLinks(ix, e, pos)
}

// putLinks indexes the causal links of an event: its id, correlation and
// causation ids and its owners.
func (w *writer) putLinks(ix *Indexed, e *events.Event, pos []byte) error {
	if e.ID != "" {
		if err := w.b[string(bID)].Put([]byte(e.ID), pos); err != nil {
			return err
		}
	}
	if e.CorrelationID != "" {
		if err := w.b[string(bCorr)].Put(indexKey(e.CorrelationID, pos), nil); err != nil {
			return err
		}
	}
	if e.CausationID != "" {
		if err := w.b[string(bCause)].Put(indexKey(e.CausationID, pos), nil); err != nil {
			return err
		}
	}
	if e.UID == "" || e.Type == events.Deleted {
		return nil
	}
	for _, owner := range ownerUIDs(e.Object) {
		if err := w.b[string(bOwner)].Put([]byte(owner+"\x00"+e.UID), nil); err != nil {
			return err
		}
	}
	return nil
}

// ownerUIDs reads metadata.ownerReferences[].uid of an object.
func ownerUIDs(obj json.RawMessage) []string {
	var o struct {
		Metadata struct {
			OwnerReferences []struct {
				UID string `json:"uid"`
			} `json:"ownerReferences"`
		} `json:"metadata"`
	}
	if json.Unmarshal(obj, &o) != nil {
		return nil
	}
	var out []string
	for _, r := range o.Metadata.OwnerReferences {
		if r.UID != "" {
			out = append(out, r.UID)
		}
	}
	return out
}
