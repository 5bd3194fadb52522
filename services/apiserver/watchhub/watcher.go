package watchhub

import (
	"context"

	"sync"

	"github.com/cairn-dev/cairn/events"
)

// Watcher is one running watch. Its methods are safe for concurrent use.
type Watcher struct {
	hub    *Hub
	t      *tail
	req    Request
	out    chan *events.Event
	parent context.Context
	ctx    context.Context // ends the watcher when done
	cancel context.CancelFunc
	wake   chan struct{} // a push happened
	done   chan struct{} // the goroutine has exited

	mu       sync.Mutex
	queue    []*record // live events waiting, from qhead on
	qhead    int
	inflight bool            // an event is popped but not yet received
	lastSent events.Revision // revision of the last event received (From before)
	live     bool            // attached to the fan-out
	ended    bool
	err      error
}

func newWatcher(ctx context.Context, h *Hub, t *tail, req Request) *Watcher {
	wctx, cancel := context.WithCancel(ctx)
	return &Watcher{
		hub:      h,
		t:        t,
		req:      req,
		out:      make(chan *events.Event),
		parent:   ctx,
		ctx:      wctx,
		cancel:   cancel,
		wake:     make(chan struct{}, 1),
		done:     make(chan struct{}),
		lastSent: req.From,
	}
}

// Events delivers the watch's events in revision order, each once. The
// channel is unbuffered, so an event counts as sent (for Progress) only
// once received. It is closed when the watch ends; Err then says why. The
// events are shared with other watchers and must not be modified.
func (w *Watcher) Events() <-chan *events.Event { return w.out }

// Progress returns the revision up to which every matching event has been
// received from Events: the hub's head once the watcher has caught up and
// received everything queued for it, else the revision of the last event
// received (req.From before the first). It never decreases; use it as the
// resourceVersion of a BOOKMARK. It takes locks shared with the fan-out, so
// call it on a timer, not per event.
func (w *Watcher) Progress() events.Revision {
	w.t.mu.RLock()
	head := w.t.head
	w.mu.Lock()
	p := w.lastSent
	if w.live && !w.ended && w.qhead == len(w.queue) && !w.inflight && head > p {
		p = head
		// Keep Progress monotonic: later events are all > head.
		w.lastSent = head
	}
	w.mu.Unlock()
	w.t.mu.RUnlock()
	return p
}

// Stop ends the watch and waits for its goroutine; Err then returns nil.
// It may be called more than once and from any goroutine.
func (w *Watcher) Stop() {
	w.fail(nil)
	<-w.done
}

// Done is closed once the watch has ended and Events is closed.
func (w *Watcher) Done() <-chan struct{} { return w.done }

// Err says why the watch ended: nil after Stop, ErrSlow, ErrClosed, the
// watch context's error, or a log read error. It is nil while running.
func (w *Watcher) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// fail ends the watcher with err unless it has already ended.
func (w *Watcher) fail(err error) {
	w.mu.Lock()
	if !w.ended {
		w.ended, w.err = true, err
	}
	w.mu.Unlock()
	w.cancel()
}

// goLive attaches w to the fan-out with replay queued first. Called with
// the tail's lock held, before w is in its index.
func (w *Watcher) goLive(replay []*record) {
	w.mu.Lock()
	w.queue, w.qhead, w.live = replay, 0, true
	w.mu.Unlock()
	if len(replay) > 0 {
		w.signal()
	}
}

func (w *Watcher) signal() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// push queues a live event; called by the tail with its lock held, so it
// never blocks. A full queue ends the watcher with ErrSlow.
func (w *Watcher) push(rec *record) {
	if rec.rev <= w.req.From {
		return
	}
	w.mu.Lock()
	if w.ended {
		w.mu.Unlock()
		return
	}
	if len(w.queue)-w.qhead >= w.hub.cfg.WatcherBuffer {
		w.ended, w.err, w.queue = true, ErrSlow, nil
		w.mu.Unlock()
		w.cancel()
		w.hub.log.Warn("watchhub: slow watcher ended", "stream", w.t.name, "watch", w.req.indexKey(), "revision", rec.rev)
		return
	}
	w.queue = append(w.queue, rec)
	w.mu.Unlock()
	w.signal()
}

// run is the watcher's goroutine: first (a catch-up read, or nothing), then
// the live pump, then cleanup.
func (w *Watcher) run(first func()) {
	defer w.finish()
	first()
	w.pump()
}

func (w *Watcher) pump() {
	for {
		w.mu.Lock()
		if w.qhead == len(w.queue) {
			w.queue, w.qhead = w.queue[:0], 0
			w.mu.Unlock()
			select {
			case <-w.wake:
				continue
			case <-w.ctx.Done():
				return
			}
		}
		rec := w.queue[w.qhead]
		w.queue[w.qhead] = nil
		w.qhead++
		skip := rec.rev <= w.lastSent
		w.inflight = !skip
		w.mu.Unlock()
		if skip {
			continue
		}
		ev := rec.event(w.hub.log, w.t.name)
		if ev == nil {
			w.mu.Lock()
			w.inflight = false
			w.mu.Unlock()
			continue
		}
		if !w.send(ev) {
			return
		}
	}
}

// send delivers ev and records it as sent.
func (w *Watcher) send(ev *events.Event) bool {
	select {
	case w.out <- ev:
	case <-w.ctx.Done():
		return false
	}
	w.mu.Lock()
	w.inflight = false
	w.lastSent = ev.Revision
	w.mu.Unlock()
	return true
}

func (w *Watcher) finish() {
	w.mu.Lock()
	if !w.ended {
		w.ended = true
		w.err = w.parent.Err()
	}
	w.queue = nil
	w.mu.Unlock()
	w.cancel()
	w.t.detach(w)
	w.hub.forget(w)
	close(w.out)
	close(w.done)
	w.hub.wg.Done()
}
