package watchhub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/services/embedded/embeddedtest"
)

// env is a NATS server with both streams and a publisher that hands out
// increasing revisions, as the apiserver's etcd would.
type env struct {
	t   testing.TB
	url string
	js  jetstream.JetStream
	rev atomic.Int64

	mu  sync.Mutex
	log []*events.Event // every published event, in revision order
}

func newEnv(t testing.TB) *env {
	t.Helper()
	n := embeddedtest.StartNATS(t)
	js, err := jetstream.New(n.Conn)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, cfg := range []jetstream.StreamConfig{
		{Name: events.Stream, Subjects: []string{events.SubjectPrefix + ".>"}, AllowDirect: true, Storage: jetstream.MemoryStorage},
		{Name: events.LeaseStream, Subjects: []string{events.LeaseSubjectPrefix + ".>"}, AllowDirect: true, MaxMsgsPerSubject: 1, Storage: jetstream.MemoryStorage},
	} {
		if _, err := js.CreateStream(ctx, cfg); err != nil {
			t.Fatalf("create stream %s: %v", cfg.Name, err)
		}
	}
	// Everything started so far (server, connection, its request mux)
	// outlives the test's cleanups; anything else must be gone.
	// Streams the test (re)creates live in the server until it stops.
	opts := []goleak.Option{
		goleak.IgnoreCurrent(),
		goleak.IgnoreTopFunction("github.com/nats-io/nats-server/v2/server.(*stream).internalLoop"),
		goleak.IgnoreTopFunction("github.com/nats-io/nats-server/v2/server.(*stream).signalConsumersLoop"),
		goleak.IgnoreTopFunction("github.com/nats-io/nats-server/v2/server/ats.Register.func1"),
	}
	t.Cleanup(func() {
		if err := goleak.Find(opts...); err != nil {
			for _, name := range []string{events.Stream, events.LeaseStream} {
				s, serr := js.Stream(context.Background(), name)
				if serr != nil {
					continue
				}
				for ci := range s.ListConsumers(context.Background()).Info() {
					t.Logf("consumer left %s on %s: %+v created %v", ci.Name, name, ci.Config, ci.Created)
				}
			}
			t.Error(err)
		}
	})
	return &env{t: t, url: n.URL(), js: js}
}

// skip burns revisions, like writes to keys outside the log would.
func (e *env) skip(n int) { e.rev.Add(int64(n)) }

// pub publishes one event and returns it. Not safe for concurrent use with
// itself (revisions must reach the stream in order).
func (e *env) pub(group, resource, node, ns, name string) *events.Event {
	e.t.Helper()
	ev := &events.Event{
		ID: fmt.Sprintf("ev-%d", e.rev.Load()+1), Revision: events.Revision(e.rev.Add(1)), Type: events.Modified,
		Group: group, Version: "v1", Resource: resource, NodeName: node, Namespace: ns, Name: name,
		Object: json.RawMessage(`{}`),
	}
	data, err := json.Marshal(ev)
	if err != nil {
		e.t.Fatal(err)
	}
	m := nats.NewMsg(ev.Subject())
	m.Data = data
	m.Header.Set(events.MsgHeaderRevision, ev.Revision.String())
	m.Header.Set(jetstream.MsgIDHeader, ev.Revision.String())
	if _, err := e.js.PublishMsg(context.Background(), m); err != nil {
		e.t.Fatalf("publish: %v", err)
	}
	e.mu.Lock()
	e.log = append(e.log, ev)
	e.mu.Unlock()
	return ev
}

// pubPods publishes n pods spread over namespaces a, b, c and nodes n1, n2.
func (e *env) pubPods(n int) {
	e.t.Helper()
	for i := 0; i < n; i++ {
		k := int(e.rev.Load())
		e.pub("", "pods", fmt.Sprintf("n%d", k%2+1), string(rune('a'+k%3)), fmt.Sprintf("p%d", k%7))
	}
}

// want returns the revisions of the published events that match req.
func (e *env) want(req Request) []events.Revision {
	var out []events.Revision
	for _, ev := range e.wantEvents(req) {
		out = append(out, ev.Revision)
	}
	return out
}

// wantEvents returns the published events that match req.
func (e *env) wantEvents(req Request) []*events.Event {
	req = req.normalized()
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []*events.Event
	for _, ev := range e.log {
		if ev.Revision > req.From && req.matches(ev.Key()) {
			out = append(out, ev)
		}
	}
	return out
}

func (e *env) head() events.Revision { return events.Revision(e.rev.Load()) }

// startHub runs a hub until the test ends.
func startHub(t testing.TB, e *env, cfg Config) *Hub {
	t.Helper()
	h := NewHub(e.js, cfg, testLogger(t))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return h
}

func testLogger(t testing.TB) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

func watch(t testing.TB, h *Hub, req Request) *Watcher {
	t.Helper()
	// The watch's context bounds its life, so it has no timeout.
	w, err := h.Watch(context.Background(), req)
	if err != nil {
		t.Fatalf("Watch(%+v): %v", req, err)
	}
	t.Cleanup(w.Stop)
	return w
}

// recv reads from w until it has received the revisions in want (exactly,
// in order) or times out.
func recv(w *Watcher, want []events.Revision, timeout time.Duration) error {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for i, rev := range want {
		select {
		case ev, ok := <-w.Events():
			if !ok {
				return fmt.Errorf("event %d of %d: watch ended: %v", i, len(want), w.Err())
			}
			if ev.Revision != rev {
				return fmt.Errorf("event %d of %d: revision %d, want %d", i, len(want), ev.Revision, rev)
			}
		case <-timer.C:
			return fmt.Errorf("timeout after %d of %d events, want revision %d next", i, len(want), rev)
		}
	}
	return nil
}

// recvLatest reads from w, a watch on the lease stream, until it has
// received the last revision in want. The lease stream keeps one message
// per lease, so a version superseded before the hub read it is never
// delivered: what arrives must be in order, each one of want, and include
// the latest version of every lease in want.
func recvLatest(w *Watcher, want []*events.Event, timeout time.Duration) error {
	if len(want) == 0 {
		return nil
	}
	latest := map[string]events.Revision{}
	known := map[events.Revision]bool{}
	for _, ev := range want {
		latest[ev.Namespace+"/"+ev.Name] = ev.Revision
		known[ev.Revision] = true
	}
	last := want[len(want)-1].Revision
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var prev events.Revision
	for prev < last {
		select {
		case ev, ok := <-w.Events():
			if !ok {
				return fmt.Errorf("watch ended after revision %d: %v", prev, w.Err())
			}
			switch {
			case ev.Revision <= prev:
				return fmt.Errorf("revision %d after %d", ev.Revision, prev)
			case !known[ev.Revision]:
				return fmt.Errorf("revision %d not expected by this watch", ev.Revision)
			}
			for key, rev := range latest {
				if prev < rev && rev < ev.Revision {
					return fmt.Errorf("latest version %d of lease %s skipped (got %d after %d)", rev, key, ev.Revision, prev)
				}
			}
			prev = ev.Revision
		case <-timer.C:
			return fmt.Errorf("timeout after revision %d, want up to %d", prev, last)
		}
	}
	return nil
}

// quiet checks that w delivers nothing for d.
func quiet(w *Watcher, d time.Duration) error {
	select {
	case ev, ok := <-w.Events():
		if !ok {
			return errors.New("watch ended")
		}
		return fmt.Errorf("unexpected event %d", ev.Revision)
	case <-time.After(d):
		return nil
	}
}

func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
