package apiserver

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/services/apiserver/storage"
	"github.com/cairn-dev/cairn/services/apiserver/watchhub"
	"github.com/cairn-dev/cairn/services/embedded/embeddedtest"
)

// gateEnv is a log gate on a real watch hub over an embedded NATS server,
// whose main stream the test itself publishes to in revision order (as the
// publisher would), and a clock the test moves.
type gateEnv struct {
	t     *testing.T
	js    jetstream.JetStream
	hub   *watchhub.Hub
	gate  *logGate
	clock atomic.Int64 // unix nanoseconds
}

func newGateEnv(t *testing.T) *gateEnv {
	n := embeddedtest.StartNATS(t)
	js, err := jetstream.New(n.Conn)
	if err != nil {
		t.Fatal(err)
	}
	for _, cfg := range []jetstream.StreamConfig{
		{Name: events.Stream, Subjects: []string{events.SubjectPrefix + ".>"}, AllowDirect: true, Storage: jetstream.MemoryStorage},
		{Name: events.LeaseStream, Subjects: []string{events.LeaseSubjectPrefix + ".>"}, AllowDirect: true, MaxMsgsPerSubject: 1, Storage: jetstream.MemoryStorage},
	} {
		if _, err := js.CreateStream(t.Context(), cfg); err != nil {
			t.Fatalf("create stream %s: %v", cfg.Name, err)
		}
	}
	e := &gateEnv{t: t, js: js}
	e.clock.Store(time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC).UnixNano())
	e.hub = watchhub.NewHub(js, watchhub.Config{}, slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.hub.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("hub: %v", err)
		}
	})
	if e.gate, err = newLogGate(e.hub, 250*time.Millisecond, e.now, prometheus.NewRegistry()); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *gateEnv) now() time.Time          { return time.Unix(0, e.clock.Load()) }
func (e *gateEnv) advance(d time.Duration) { e.clock.Add(int64(d)) }

// publish puts the event of a pod's change at rev on the main stream and
// waits until the hub has it.
func (e *gateEnv) publish(rev events.Revision) {
	e.t.Helper()
	ev := &events.Event{ID: "ev-" + rev.String(), Revision: rev, Type: events.Modified, Version: "v1", Resource: "pods",
		Namespace: "default", Name: "p" + rev.String(), Object: json.RawMessage(`{}`)}
	data, err := json.Marshal(ev)
	if err != nil {
		e.t.Fatal(err)
	}
	m := nats.NewMsg(ev.Subject())
	m.Data = data
	m.Header.Set(events.MsgHeaderRevision, rev.String())
	m.Header.Set(jetstream.MsgIDHeader, rev.String())
	if _, err := e.js.PublishMsg(e.t.Context(), m); err != nil {
		e.t.Fatalf("publish %d: %v", rev, err)
	}
	ctx, cancel := context.WithTimeout(e.t.Context(), 10*time.Second)
	defer cancel()
	if err := e.hub.WaitFor(ctx, events.Stream, rev); err != nil {
		e.t.Fatal(err)
	}
}

// hold starts a write's wait and returns a channel closed when it is let
// through, once the gate holds it (its holding gauge counts it).
func (e *gateEnv) hold() <-chan struct{} {
	e.t.Helper()
	before := testutil.ToFloat64(e.gate.holding)
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.gate.wait(context.Background())
	}()
	deadline := time.Now().Add(10 * time.Second)
	for testutil.ToFloat64(e.gate.holding) <= before {
		select {
		case <-done:
			e.t.Fatal("the write was let through, want it held")
		default:
		}
		if time.Now().After(deadline) {
			e.t.Fatal("the write is neither held nor let through after 10s")
		}
		time.Sleep(time.Millisecond)
	}
	return done
}

// passes requires a write's wait to return at once (the clock stands
// still, so the gate cannot time out on it).
func (e *gateEnv) passes(step string) {
	e.t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.gate.wait(context.Background())
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		e.t.Fatalf("%s: the write is held, want it let through", step)
	}
}

func released(t *testing.T, step string, done <-chan struct{}) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: the held write is still held after 10s", step)
	}
}

// TestLogGate walks the log gate through what a loaded apiserver meets:
// writes within the bound pass, a write is held while the log is further
// behind than the bound and let through as soon as the hub has the
// oldest write, leases never count, a log that stands still opens the
// gate (a publisher failing over does not stall writes), and no write is
// held longer than maxHold.
func TestLogGate(t *testing.T) {
	e := newGateEnv(t)
	pod := func(i int) string { return storage.Key("", "pods", "default", "p"+events.Revision(i).String()) }

	e.passes("no write yet")
	e.gate.committed(pod(1), 1)
	e.advance(200 * time.Millisecond)
	e.passes("the oldest write not on the log is 200ms old, within 250ms")

	e.advance(100 * time.Millisecond)
	held := e.hold()
	e.gate.committed(pod(2), 2) // a later write while the first is held
	e.publish(1)
	released(t, "the hub has the oldest write", held)
	e.passes("the write left (rev 2) is new")

	// Leases go to their own stream: an old one never holds writes.
	e.publish(2)
	e.gate.committed(storage.Key("coordination.k8s.io", "leases", "kube-node-lease", "n1"), 3)
	e.advance(time.Minute)
	e.passes("only a lease is not on the log")

	// A log that does not move opens the gate after logStall.
	e.gate.committed(pod(4), 4)
	e.advance(300 * time.Millisecond)
	held = e.hold()
	e.advance(logStall)
	released(t, "the log stood still for logStall", held)
	e.passes("the log still stands still")
	e.publish(4)

	// A log that moves, but never to the held write's revision, lets it
	// through after maxHold.
	e.gate.committed(pod(5), 5)
	e.gate.committed(pod(6), 6)
	e.advance(300 * time.Millisecond)
	held = e.hold()
	e.publish(5)
	e.advance(maxHold)
	released(t, "held for maxHold", held)
	if n := testutil.CollectAndCount(e.gate.held); n != 1 {
		t.Errorf("held histogram has %d series, want 1", n)
	}
	if got := testutil.ToFloat64(e.gate.holding); got != 0 {
		t.Errorf("holding gauge %v after every write left, want 0", got)
	}
}

// TestLogGateExempt: reads, and the writes of Leases and Nodes, are never
// held; every other write is.
func TestLogGateExempt(t *testing.T) {
	for _, c := range []struct {
		verb, group, resource string
		want                  bool
	}{
		{"get", "", "pods", true},
		{"list", "", "pods", true},
		{"watch", "apps", "deployments", true},
		{"update", "coordination.k8s.io", "leases", true},
		{"patch", "", "nodes", true},
		{"create", "", "pods", false},
		{"patch", "", "pods", false},
		{"delete", "apps", "replicasets", false},
		{"deletecollection", "", "events", false},
		{"update", "events.k8s.io", "events", false},
	} {
		if got := exempt(requestInfo{Verb: c.verb, APIGroup: c.group, Resource: c.resource}); got != c.want {
			t.Errorf("exempt(%s %s/%s) = %v, want %v", c.verb, c.group, c.resource, got, c.want)
		}
	}
}
