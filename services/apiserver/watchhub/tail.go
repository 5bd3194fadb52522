package watchhub

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/events"
)

// tail follows one stream with one ordered consumer, keeps the ring and fans
// events out to the live watchers of that stream.
type tail struct {
	hub   *Hub
	name  string
	ready chan struct{} // closed once the pre-fill has caught up

	// stream is set before ready is closed and not changed afterwards.
	stream jetstream.Stream

	mu   sync.RWMutex
	ring *ring
	// The ring holds every decodable message with sequence in
	// (floorSeq, lastSeq], and so every event with revision in
	// (floorRev, head] when floorKnown.
	floorSeq   uint64
	floorRev   events.Revision
	floorKnown bool
	lastSeq    uint64
	head       events.Revision
	isReady    bool
	// changed is closed (and reset to nil) when head advances; it exists
	// only while someone waits in WaitFor.
	changed  chan struct{}
	watchers map[string]map[*Watcher]struct{}

	// floorSeqA mirrors floorSeq for lock-free checks by catch-up readers.
	floorSeqA atomic.Uint64
}

func newTail(h *Hub, name string) *tail {
	return &tail{
		hub:      h,
		name:     name,
		ready:    make(chan struct{}),
		ring:     newRing(h.cfg.RingSize),
		watchers: map[string]map[*Watcher]struct{}{},
	}
}

// run tails the stream until ctx is done. Consumer failures are retried
// from the last sequence seen, so run returns only when ctx is done.
func (t *tail) run(ctx context.Context) error {
	log := t.hub.log.With("stream", t.name)
	target, err := t.start(ctx)
	if err != nil {
		return nil //nolint:nilerr // only ctx ends start
	}
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		t.mu.RLock()
		next := t.lastSeq + 1
		t.mu.RUnlock()
		err := t.consume(ctx, next, target)
		if ctx.Err() != nil {
			return nil
		}
		log.Warn("watchhub: tail failed, restarting", "from", next, "err", err)
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return nil
		}
		backoff = min(2*backoff, 5*time.Second)
	}
	return nil
}

// start waits for the stream, positions the tail RingSize messages before
// the end and returns the last sequence the pre-fill must reach.
func (t *tail) start(ctx context.Context) (uint64, error) {
	delay := 50 * time.Millisecond
	for {
		s, err := t.hub.js.Stream(ctx, t.name)
		if err == nil {
			t.stream = s
			break
		}
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		t.hub.log.Info("watchhub: waiting for stream", "stream", t.name, "err", err)
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return 0, ctx.Err()
		}
		delay = min(2*delay, 2*time.Second)
	}
	st := t.stream.CachedInfo().State
	from := st.FirstSeq
	if n := uint64(t.hub.cfg.RingSize); st.LastSeq >= n && st.LastSeq-n+1 > from {
		from = st.LastSeq - n + 1
	}
	if st.Msgs == 0 {
		from = st.LastSeq + 1
	}
	if from == 0 {
		from = 1
	}
	t.mu.Lock()
	t.floorSeq, t.lastSeq = from-1, from-1
	t.floorSeqA.Store(from - 1)
	if from == 1 {
		// Nothing was ever before the ring.
		t.floorKnown = true
	}
	if st.Msgs == 0 {
		t.markReadyLocked()
	}
	t.mu.Unlock()
	return st.LastSeq, nil
}

func (t *tail) markReadyLocked() {
	if !t.isReady {
		t.isReady = true
		close(t.ready)
	}
}

// consume runs one ordered consumer from sequence from until it fails or
// ctx is done.
func (t *tail) consume(ctx context.Context, from, target uint64) error {
	r, err := events.NewReader(ctx, t.hub.js, events.ReadOptions{Stream: t.name, FromSeq: from, Follow: true})
	if err != nil {
		return err
	}
	defer r.Stop()
	for {
		m, err := r.Next(ctx)
		if err != nil {
			return err
		}
		rec, err := newRecord(m)
		if err != nil {
			t.hub.log.Error("watchhub: undecodable event skipped", "stream", t.name, "seq", m.Seq, "err", err)
		}
		t.apply(m.Seq, rec, m.Pending == 0 || m.Seq >= target)
	}
}

// apply records the message at seq (rec nil if unreadable) and fans it out.
func (t *tail) apply(seq uint64, rec *record, caughtUp bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if seq <= t.lastSeq {
		return
	}
	t.lastSeq = seq
	if caughtUp {
		defer t.markReadyLocked()
	}
	if rec == nil {
		return
	}
	if rec.rev <= t.head {
		t.hub.log.Error("watchhub: revision out of order skipped", "stream", t.name, "seq", seq, "revision", rec.rev, "head", t.head)
		return
	}
	if old, evicted := t.ring.push(rec); evicted {
		t.floorSeq, t.floorRev, t.floorKnown = old.seq, old.rev, true
		t.floorSeqA.Store(old.seq)
	} else if !t.floorKnown {
		// Events between the message before the ring and this one do not
		// exist in the stream.
		t.floorRev, t.floorKnown = rec.rev-1, true
	}
	t.head = rec.rev
	if t.changed != nil {
		close(t.changed)
		t.changed = nil
	}
	t.dispatchLocked(rec)
}

// dispatchLocked queues rec for every live watcher it matches. It decodes
// rec first, here, if any watcher wants it: watchers of the same event then
// never wait on each other for the decode.
func (t *tail) dispatchLocked(rec *record) {
	g := rec.key.Group + "/"
	for _, key := range [2]string{g + rec.key.Resource, g + "*"} {
		for w := range t.watchers[key] {
			if !w.req.matches(rec.key) {
				continue
			}
			if rec.event(t.hub.log, t.name) == nil {
				return
			}
			w.push(rec)
		}
	}
}

func (t *tail) addLocked(w *Watcher) {
	key := w.req.indexKey()
	set := t.watchers[key]
	if set == nil {
		set = map[*Watcher]struct{}{}
		t.watchers[key] = set
	}
	set[w] = struct{}{}
}

func (t *tail) detach(w *Watcher) {
	t.mu.Lock()
	defer t.mu.Unlock()
	key := w.req.indexKey()
	if set := t.watchers[key]; set != nil {
		delete(set, w)
		if len(set) == 0 {
			delete(t.watchers, key)
		}
	}
}

// attachFromRing makes w live with a replay from the ring if the ring (and
// the live fan-out after it) holds every event after w.req.From.
func (t *tail) attachFromRing(w *Watcher) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	from := w.req.From
	if from < t.head && (!t.floorKnown || from < t.floorRev) {
		return false
	}
	w.goLive(t.ring.collect(t.ring.afterRev(from), func(rec *record) bool { return w.req.matches(rec.key) }))
	t.addLocked(w)
	return true
}

// attachAfterSeq makes w live if the ring holds every message after
// sequence q; the replay is every matching ring event after q not yet sent.
func (t *tail) attachAfterSeq(w *Watcher, q uint64, sent events.Revision) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.floorSeq > q {
		return false
	}
	w.goLive(t.ring.collect(t.ring.afterSeq(q), func(rec *record) bool {
		return rec.rev > sent && w.req.matches(rec.key)
	}))
	t.addLocked(w)
	return true
}

// position returns floorSeq and lastSeq.
func (t *tail) position() (floor, last uint64) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.floorSeq, t.lastSeq
}
