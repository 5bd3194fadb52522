package watchhub

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/events"
)

// Sentinel errors of the hub. Check them with errors.Is.
var (
	// ErrClosed is returned by Watch and WaitFor, and by Watcher.Err, once
	// Run has returned.
	ErrClosed = errors.New("watchhub: hub closed")
	// ErrSlow ends a watcher whose reader fell more than Config.WatcherBuffer
	// events behind the log.
	ErrSlow = errors.New("watchhub: watcher too slow")
	// ErrUnknownStream is returned by Head and WaitFor for a stream the hub
	// does not tail.
	ErrUnknownStream = errors.New("watchhub: unknown stream")
)

// Defaults for Config.
const (
	DefaultRingSize      = 10000
	DefaultWatcherBuffer = 10000
	DefaultHandoffPoll   = 200 * time.Millisecond
)

// Config tunes a Hub. The zero value is usable.
type Config struct {
	// RingSize is how many of the latest events of each stream the hub keeps
	// in memory (and pre-fills from the log on start). Watches from a
	// revision inside the ring are served from memory. Default 10,000.
	RingSize int
	// WatcherBuffer bounds how many events may wait for one watcher's reader.
	// A watcher further behind is ended with ErrSlow. Default 10,000.
	WatcherBuffer int
	// HandoffPoll is how often an idle catch-up reader (a watch from before
	// the ring) tries to hand off to the live fan-out. Default 200ms.
	HandoffPoll time.Duration
	// Stream and LeaseStream name the two streams; defaults events.Stream
	// and events.LeaseStream.
	Stream, LeaseStream string
}

func (c Config) withDefaults() Config {
	if c.RingSize <= 0 {
		c.RingSize = DefaultRingSize
	}
	if c.WatcherBuffer <= 0 {
		c.WatcherBuffer = DefaultWatcherBuffer
	}
	if c.HandoffPoll <= 0 {
		c.HandoffPoll = DefaultHandoffPoll
	}
	if c.Stream == "" {
		c.Stream = events.Stream
	}
	if c.LeaseStream == "" {
		c.LeaseStream = events.LeaseStream
	}
	return c
}

// Request selects what a watch delivers. Group "" (or "core") is the core
// group, as in events.Filter; an empty Resource, Node, Namespace or Name
// matches every value. Leases (coordination.k8s.io/leases) are served from
// the lease stream, everything else from the main stream.
type Request struct {
	Group, Resource string
	// Node matches Event.NodeName (spec.nodeName of pods).
	Node      string
	Namespace string
	Name      string
	// From is the resourceVersion the client has seen: the watch delivers
	// every matching event with revision > From.
	From events.Revision
}

func (r Request) normalized() Request {
	if r.Group == "core" {
		r.Group = ""
	}
	return r
}

func (r Request) matches(k events.SubjectKey) bool {
	return k.Group == r.Group &&
		(r.Resource == "" || k.Resource == r.Resource) &&
		(r.Node == "" || k.NodeName == r.Node) &&
		(r.Namespace == "" || k.Namespace == r.Namespace) &&
		(r.Name == "" || k.Name == r.Name)
}

// indexKey is the key of the tail's watcher index for a request: group and
// resource, "*" for every resource of the group.
func (r Request) indexKey() string {
	res := r.Resource
	if res == "" {
		res = "*"
	}
	return r.Group + "/" + res
}

// Hub serves watches from the log. Create it with NewHub and call Run.
type Hub struct {
	js    jetstream.JetStream
	cfg   Config
	log   *slog.Logger
	tails map[string]*tail
	main  *tail
	lease *tail
	done  chan struct{} // closed when Run has stopped every watcher

	mu       sync.Mutex
	started  bool
	closed   bool
	watchers map[*Watcher]struct{}
	wg       sync.WaitGroup // watcher goroutines
}

// NewHub returns a hub over js; nothing runs until Run.
func NewHub(js jetstream.JetStream, cfg Config, log *slog.Logger) *Hub {
	cfg = cfg.withDefaults()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h := &Hub{
		js:       js,
		cfg:      cfg,
		log:      log,
		done:     make(chan struct{}),
		watchers: map[*Watcher]struct{}{},
	}
	h.main = newTail(h, cfg.Stream)
	h.lease = newTail(h, cfg.LeaseStream)
	h.tails = map[string]*tail{cfg.Stream: h.main, cfg.LeaseStream: h.lease}
	return h
}

// Run tails both streams and fans events out until ctx is done. It waits
// for the streams to exist. When it returns, every watcher has been ended
// with ErrClosed and every goroutine of the hub has exited. Run may be
// called once.
func (h *Hub) Run(ctx context.Context) error {
	h.mu.Lock()
	if h.started {
		h.mu.Unlock()
		return errors.New("watchhub: Run called twice")
	}
	h.started = true
	h.mu.Unlock()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, t := range []*tail{h.main, h.lease} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := t.run(ctx); err != nil {
				errs[i] = err
				cancel()
			}
		}()
	}
	wg.Wait()
	h.shutdown()
	return errors.Join(errs...)
}

func (h *Hub) shutdown() {
	h.mu.Lock()
	h.closed = true
	ws := make([]*Watcher, 0, len(h.watchers))
	for w := range h.watchers {
		ws = append(ws, w)
	}
	h.mu.Unlock()
	for _, w := range ws {
		w.fail(ErrClosed)
	}
	h.wg.Wait()
	close(h.done)
}

// Head returns the revision of the last event the hub has seen on stream
// (events.Stream or events.LeaseStream), 0 before the first.
func (h *Hub) Head(stream string) (events.Revision, error) {
	t, ok := h.tails[stream]
	if !ok {
		return 0, fmt.Errorf("watchhub: head %q: %w", stream, ErrUnknownStream)
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.head, nil
}

// WaitFor returns once the hub has seen an event with revision >= rev on
// stream. Revisions are global across both streams, so pass the revision of
// a change that went to that stream; otherwise WaitFor waits for the next
// later event. It returns ctx's error, or ErrClosed once Run has returned.
func (h *Hub) WaitFor(ctx context.Context, stream string, rev events.Revision) error {
	t, ok := h.tails[stream]
	if !ok {
		return fmt.Errorf("watchhub: wait %q: %w", stream, ErrUnknownStream)
	}
	for {
		t.mu.Lock()
		if t.head >= rev {
			t.mu.Unlock()
			return nil
		}
		if t.changed == nil {
			t.changed = make(chan struct{})
		}
		ch := t.changed
		t.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("watchhub: wait for %d: %w", rev, ctx.Err())
		case <-h.done:
			return ErrClosed
		}
	}
}

// Watch starts a watch. It waits until the hub has caught up with the log
// (on start), finds where the watch starts, and returns a Watcher that
// delivers, in revision order without gaps or duplicates, every matching
// event with revision > req.From. The watch lives until ctx is done, Stop is
// called, its reader falls too far behind (ErrSlow) or Run returns.
//
// Errors: one wrapping events.ErrTooOld when the log no longer holds every
// event after req.From (the apiserver answers 410 Gone); ErrClosed; ctx's
// error; a NATS error from finding the start in the log.
func (h *Hub) Watch(ctx context.Context, req Request) (*Watcher, error) {
	req = req.normalized()
	t := h.main
	if events.IsLease(req.Group, req.Resource) {
		t = h.lease
	}
	select {
	case <-t.ready:
	case <-ctx.Done():
		return nil, fmt.Errorf("watchhub: watch: %w", ctx.Err())
	case <-h.done:
		return nil, ErrClosed
	}

	w := newWatcher(ctx, h, t, req)
	if t.attachFromRing(w) {
		if err := h.start(w, func() {}); err != nil {
			t.detach(w)
			return nil, err
		}
		return w, nil
	}
	seq, err := events.SeekRevision(ctx, h.js, t.name, req.From+1)
	if err != nil {
		w.cancel()
		return nil, fmt.Errorf("watchhub: watch %s from %d: %w", req.indexKey(), req.From, err)
	}
	if err := h.start(w, func() { w.catchUp(seq) }); err != nil {
		return nil, err
	}
	return w, nil
}

// start registers w and runs its goroutine: first, then the live pump.
func (h *Hub) start(w *Watcher, first func()) error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		w.cancel()
		return ErrClosed
	}
	h.watchers[w] = struct{}{}
	h.wg.Add(1)
	h.mu.Unlock()
	go w.run(first)
	return nil
}

func (h *Hub) forget(w *Watcher) {
	h.mu.Lock()
	delete(h.watchers, w)
	h.mu.Unlock()
}
