package watchhub

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/events"
)

// catchUp serves a watch that starts before the ring: a dedicated ordered
// consumer, filtered by the server on the watch's subject, reads the log
// from sequence seq and delivers directly (flow-controlled by the client).
// Whenever the ring holds every message after the last sequence read, the
// watcher is handed to the live fan-out under the tail's lock: the ring
// replays what the reader has not delivered, the fan-out delivers the rest,
// and the reader stops before reading anything else. So no event is lost or
// repeated, and the dedicated consumer lives only until the watch has
// caught up.
//
// On failure it ends the watcher, and the pump that follows exits at once.
func (w *Watcher) catchUp(seq uint64) {
	q := seq - 1 // every matching message up to q has been delivered
	if w.handoff(q) {
		return
	}
	filter := events.Filter(w.req.Group, w.req.Resource, w.req.Node, w.req.Namespace, w.req.Name)
	r, err := events.NewReader(w.ctx, w.hub.js, events.ReadOptions{Stream: w.t.name, Filters: []string{filter}, FromSeq: seq, Follow: true})
	if err != nil {
		w.fail(fmt.Errorf("watchhub: catch-up: %w", err))
		return
	}
	defer r.Stop()
	for {
		nctx, cancel := context.WithTimeout(w.ctx, w.hub.cfg.HandoffPoll)
		m, err := r.Next(nctx)
		cancel()
		if w.ctx.Err() != nil {
			return
		}
		if errors.Is(err, context.DeadlineExceeded) {
			if w.handoff(q) {
				return
			}
			continue
		}
		if err != nil {
			w.fail(fmt.Errorf("watchhub: catch-up: %w", err))
			return
		}
		if rec, err := newRecord(m); err == nil && rec.rev > w.lastSentRev() && w.req.matches(rec.key) {
			if ev := rec.event(w.hub.log, w.t.name); ev != nil && !w.send(ev) {
				return
			}
		}
		q = m.Seq
		if (w.t.floorSeqA.Load() <= q || m.Pending == 0) && w.handoff(q) {
			return
		}
	}
}

func (w *Watcher) lastSentRev() events.Revision {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lastSent
}

// handoff attaches w to the live fan-out if no matching message after
// sequence q is missing from the ring. When the ring starts after q, one
// direct get finds the next matching message in the log: if it lies past
// the ring's floor, the messages in between do not concern this watch.
func (w *Watcher) handoff(q uint64) bool {
	floor, last := w.t.position()
	if floor > q {
		filter := events.Filter(w.req.Group, w.req.Resource, w.req.Node, w.req.Namespace, w.req.Name)
		m, err := w.t.stream.GetMsg(w.ctx, q+1, jetstream.WithGetMsgSubject(filter))
		switch {
		case errors.Is(err, jetstream.ErrMsgNotFound):
			// Nothing matches in (q, last]: last was stored before the get.
			q = last
		case err != nil:
			if w.ctx.Err() == nil {
				w.hub.log.Debug("watchhub: handoff probe failed", "stream", w.t.name, "err", err)
			}
			return false
		case m.Sequence > floor:
			q = m.Sequence - 1
		default:
			return false // the reader must deliver m first
		}
	}
	return w.t.attachAfterSeq(w, q, w.lastSentRev())
}
