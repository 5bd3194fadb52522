package watchhub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/events"
)

const wait = 10 * time.Second

func TestWatchOrderAndFilter(t *testing.T) {
	e := newEnv(t)
	// History before the hub starts (pre-filled into the ring) ...
	e.pubPods(30)
	e.skip(5)
	e.pub("apps", "deployments", "", "a", "web")
	e.pub("", "nodes", "", "", "n1")
	e.pub("", "configmaps", "", "a", "p1")
	h := startHub(t, e, Config{})

	tests := []struct {
		name string
		req  Request
	}{
		{"all pods", Request{Resource: "pods"}},
		{"pods in a", Request{Resource: "pods", Namespace: "a"}},
		{"one pod", Request{Resource: "pods", Namespace: "b", Name: "p3"}},
		{"pods of node n2", Request{Resource: "pods", Node: "n2"}},
		{"core group", Request{Group: "core"}},
		{"deployments", Request{Group: "apps", Resource: "deployments"}},
		{"configmaps in a", Request{Resource: "configmaps", Namespace: "a"}},
		{"from the middle", Request{Resource: "pods", From: 17}},
	}
	ws := make([]*Watcher, len(tests))
	for i, tt := range tests {
		ws[i] = watch(t, h, tt.req)
	}
	// ... and live events after.
	e.pubPods(30)
	e.pub("apps", "deployments", "", "a", "web")
	e.pub("apps", "replicasets", "", "a", "web-1")
	e.pub("", "configmaps", "", "b", "p1")
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := e.want(tt.req)
			if len(want) == 0 {
				t.Fatal("test publishes nothing for this request")
			}
			if err := recv(ws[i], want, wait); err != nil {
				t.Fatal(err)
			}
			if err := quiet(ws[i], 20*time.Millisecond); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestWatchFromRing(t *testing.T) {
	e := newEnv(t)
	e.pubPods(200)
	h := startHub(t, e, Config{RingSize: 50})
	from := e.head() - 30
	w := watch(t, h, Request{Resource: "pods", From: from})
	w.mu.Lock()
	live := w.live
	w.mu.Unlock()
	if !live {
		t.Fatal("watch inside the ring did not go live at once")
	}
	e.pubPods(20)
	if err := recv(w, e.want(Request{Resource: "pods", From: from}), wait); err != nil {
		t.Fatal(err)
	}
}

// TestWatchBeforeRing starts watches older than the ring while events are
// published concurrently: each must catch up from the log, hand off to the
// live fan-out, and see every event once.
func TestWatchBeforeRing(t *testing.T) {
	e := newEnv(t)
	e.pubPods(300)
	h := startHub(t, e, Config{RingSize: 20, HandoffPoll: 10 * time.Millisecond})

	const more = 600
	pubDone := make(chan struct{})
	go func() {
		defer close(pubDone)
		for i := 0; i < more; i++ {
			e.pub("", "pods", "n1", string(rune('a'+i%3)), fmt.Sprintf("q%d", i%5))
			if i%50 == 0 {
				time.Sleep(2 * time.Millisecond)
			}
		}
	}()
	reqs := []Request{
		{Resource: "pods"},
		{Resource: "pods", From: 100},
		{Resource: "pods", Namespace: "c", From: 50},
		{Resource: "pods", Namespace: "b", Name: "p2", From: 10},
		{Resource: "pods", Name: "q3", From: 280}, // matches only live events
	}
	ws := make([]*Watcher, len(reqs))
	for i, req := range reqs {
		ws[i] = watch(t, h, req)
		w := ws[i]
		w.mu.Lock()
		live := w.live
		w.mu.Unlock()
		if live && req.From < 280 {
			t.Errorf("watch from %d went live without catching up", req.From)
		}
	}
	<-pubDone
	for i, req := range reqs {
		t.Run(fmt.Sprintf("%+v", req), func(t *testing.T) {
			if err := recv(ws[i], e.want(req), wait); err != nil {
				t.Fatal(err)
			}
			if err := quiet(ws[i], 20*time.Millisecond); err != nil {
				t.Fatal(err)
			}
			eventually(t, "handoff to live", func() bool {
				ws[i].mu.Lock()
				defer ws[i].mu.Unlock()
				return ws[i].live
			})
		})
	}
	// After handoff, new events still arrive, once.
	e.pubPods(10)
	for i, req := range reqs {
		want := e.want(req)
		var tail []events.Revision
		for _, r := range want {
			if r > events.Revision(300+more) {
				tail = append(tail, r)
			}
		}
		if err := recv(ws[i], tail, wait); err != nil {
			t.Fatalf("%+v after handoff: %v", req, err)
		}
	}
}

func TestWatchTooOld(t *testing.T) {
	e := newEnv(t)
	e.pubPods(100)
	s, err := e.js.Stream(context.Background(), events.Stream)
	if err != nil {
		t.Fatal(err)
	}
	// Lose revisions 1..50 (sequence = revision here).
	if err := s.Purge(context.Background(), jetstream.WithPurgeSequence(51)); err != nil {
		t.Fatal(err)
	}
	h := startHub(t, e, Config{RingSize: 10})
	tests := []struct {
		from   events.Revision
		tooOld bool
	}{
		{0, true},
		{10, true},
		{49, true},
		{50, false}, // needs 51.., which the log holds
		{70, false},
		{95, false}, // in the ring
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.from), func(t *testing.T) {
			w, err := h.Watch(context.Background(), Request{Resource: "pods", From: tt.from})
			if tt.tooOld {
				if !errors.Is(err, events.ErrTooOld) {
					t.Fatalf("got %v, want ErrTooOld", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer w.Stop()
			if err := recv(w, e.want(Request{Resource: "pods", From: tt.from}), wait); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestWatchFromFuture(t *testing.T) {
	e := newEnv(t)
	e.pubPods(10)
	h := startHub(t, e, Config{})
	from := e.head() + 5
	w := watch(t, h, Request{Resource: "pods", From: from})

	waited := make(chan error, 1)
	go func() { waited <- h.WaitFor(context.Background(), events.Stream, from+3) }()
	e.pubPods(5) // up to from: nothing to deliver
	if err := quiet(w, 50*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-waited:
		t.Fatalf("WaitFor returned early: %v", err)
	default:
	}
	if p := w.Progress(); p != from {
		t.Fatalf("Progress = %d, want %d", p, from)
	}
	e.pubPods(5)
	if err := recv(w, e.want(Request{Resource: "pods", From: from}), wait); err != nil {
		t.Fatal(err)
	}
	if err := <-waited; err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := h.WaitFor(ctx, events.Stream, e.head()+1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitFor past head: %v", err)
	}
	if err := h.WaitFor(ctx, "NOPE", 1); !errors.Is(err, ErrUnknownStream) {
		t.Fatalf("WaitFor unknown stream: %v", err)
	}
}

func TestSlowWatcher(t *testing.T) {
	e := newEnv(t)
	h := startHub(t, e, Config{WatcherBuffer: 50})
	slow := watch(t, h, Request{Resource: "pods"})
	fast := watch(t, h, Request{Resource: "pods"})
	var (
		mu  sync.Mutex
		got []events.Revision
	)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range fast.Events() {
			mu.Lock()
			got = append(got, ev.Revision)
			n := len(got)
			mu.Unlock()
			if n == 200 {
				return
			}
		}
	}()
	// Chunks smaller than the buffer, so the reading watcher never falls
	// 50 behind however the hub batches; the other never reads.
	for i := 1; i <= 10; i++ {
		e.pubPods(20)
		eventually(t, "fast watcher to keep up", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(got) == 20*i
		})
	}
	select {
	case <-slow.Done():
	case <-time.After(wait):
		t.Fatal("slow watcher not ended")
	}
	if !errors.Is(slow.Err(), ErrSlow) {
		t.Fatalf("slow watcher Err = %v, want ErrSlow", slow.Err())
	}
	for range slow.Events() { // closed
	}
	<-done
	if fast.Err() != nil {
		t.Fatalf("fast watcher ended: %v", fast.Err())
	}
	if fmt.Sprint(got) != fmt.Sprint(e.want(Request{Resource: "pods"})) {
		t.Fatalf("fast watcher got %v", got)
	}
}

func TestProgress(t *testing.T) {
	e := newEnv(t)
	e.pubPods(3)
	h := startHub(t, e, Config{})
	start := e.head()
	w := watch(t, h, Request{Resource: "pods", Namespace: "zz", From: start})
	if p := w.Progress(); p != start {
		t.Fatalf("Progress = %d, want %d", p, start)
	}
	// Events the watcher does not match still move its progress.
	e.pubPods(10)
	eventually(t, "progress to head", func() bool { return w.Progress() == e.head() })

	// An event queued but not received holds progress back.
	ev := e.pub("", "pods", "", "zz", "x")
	e.pubPods(3)
	if err := h.WaitFor(context.Background(), events.Stream, e.head()); err != nil {
		t.Fatal(err)
	}
	if p := w.Progress(); p >= ev.Revision {
		t.Fatalf("Progress = %d before event %d was received", p, ev.Revision)
	}
	if err := recv(w, []events.Revision{ev.Revision}, wait); err != nil {
		t.Fatal(err)
	}
	eventually(t, "progress after receive", func() bool { return w.Progress() == e.head() })
}

func TestLeases(t *testing.T) {
	e := newEnv(t)
	e.pub("coordination.k8s.io", "leases", "", "kube-node-lease", "n1")
	e.pubPods(2)
	h := startHub(t, e, Config{})
	leases := watch(t, h, Request{Group: "coordination.k8s.io", Resource: "leases", Namespace: "kube-node-lease"})
	one := watch(t, h, Request{Group: "coordination.k8s.io", Resource: "leases", Name: "n2"})
	pods := watch(t, h, Request{Resource: "pods"})
	for i := 0; i < 5; i++ {
		e.pub("coordination.k8s.io", "leases", "", "kube-node-lease", fmt.Sprintf("n%d", i%3))
		e.pubPods(1)
	}
	for _, c := range []struct {
		w   *Watcher
		req Request
	}{
		{leases, Request{Group: "coordination.k8s.io", Resource: "leases", Namespace: "kube-node-lease"}},
		{one, Request{Group: "coordination.k8s.io", Resource: "leases", Name: "n2"}},
		{pods, Request{Resource: "pods"}},
	} {
		var err error
		if c.req.Resource == "leases" {
			// A renewal superseded before the hub read it is gone from
			// the lease stream; the latest of each lease always arrives.
			err = recvLatest(c.w, e.wantEvents(c.req), wait)
		} else {
			err = recv(c.w, e.want(c.req), wait)
		}
		if err != nil {
			t.Fatalf("%+v: %v", c.req, err)
		}
		if err := quiet(c.w, 20*time.Millisecond); err != nil {
			t.Fatalf("%+v: %v", c.req, err)
		}
	}
	lh, _ := h.Head(events.LeaseStream)
	mh, _ := h.Head(events.Stream)
	if lh != e.head()-1 || mh != e.head() {
		t.Fatalf("heads lease %d main %d, published up to %d", lh, mh, e.head())
	}
}

func TestManyWatchers(t *testing.T) {
	e := newEnv(t)
	e.pubPods(600)
	h := startHub(t, e, Config{RingSize: 500, HandoffPoll: 10 * time.Millisecond})
	var reqs []Request
	for i := 0; i < 200; i++ {
		// One in ten starts before the ring and catches up from the log.
		req := Request{Resource: "pods", From: events.Revision(500 + i%100)}
		if i%10 == 0 {
			req.From = events.Revision(i)
		}
		switch i % 4 {
		case 1:
			req.Namespace = string(rune('a' + i%3))
		case 2:
			req.Node = fmt.Sprintf("n%d", i%2+1)
		case 3:
			req.Namespace, req.Name = "a", fmt.Sprintf("p%d", i%7)
		}
		reqs = append(reqs, req)
	}
	pubDone := make(chan struct{})
	go func() {
		defer close(pubDone)
		e.pubPods(400)
	}()
	var wg sync.WaitGroup
	errs := make(chan error, len(reqs))
	for _, req := range reqs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w, err := h.Watch(context.Background(), req)
			if err != nil {
				errs <- err
				return
			}
			defer w.Stop()
			<-pubDone
			if err := recv(w, e.want(req), 3*wait); err != nil {
				errs <- fmt.Errorf("%+v: %w", req, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestRunEndsWatchers(t *testing.T) {
	e := newEnv(t)
	e.pubPods(5)
	h := NewHub(e.js, Config{}, testLogger(t))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Run(ctx) }()

	w := watch(t, h, Request{Resource: "pods"})
	wctx, wcancel := context.WithCancel(context.Background())
	w2, err := h.Watch(wctx, Request{Resource: "pods"})
	if err != nil {
		t.Fatal(err)
	}
	if err := recv(w2, e.want(Request{Resource: "pods"}), wait); err != nil {
		t.Fatal(err)
	}
	wcancel()
	<-w2.Done()
	if !errors.Is(w2.Err(), context.Canceled) {
		t.Fatalf("cancelled watch Err = %v", w2.Err())
	}
	stopped := watch(t, h, Request{Resource: "pods"})
	stopped.Stop()
	if stopped.Err() != nil {
		t.Fatalf("stopped watch Err = %v", stopped.Err())
	}

	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	select {
	case <-w.Done():
	default:
		t.Fatal("watcher still running after Run returned")
	}
	if !errors.Is(w.Err(), ErrClosed) {
		t.Fatalf("Err = %v, want ErrClosed", w.Err())
	}
	if _, err := h.Watch(context.Background(), Request{Resource: "pods"}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Watch after Run: %v", err)
	}
	if err := h.WaitFor(context.Background(), events.Stream, 1000); !errors.Is(err, ErrClosed) {
		t.Fatalf("WaitFor after Run: %v", err)
	}
	if err := h.Run(context.Background()); err == nil {
		t.Fatal("second Run succeeded")
	}
}

// TestWatchBeforeStreams starts the hub before the streams exist.
func TestWatchBeforeStreams(t *testing.T) {
	e := newEnv(t)
	var cfgs []jetstream.StreamConfig
	for _, name := range []string{events.Stream, events.LeaseStream} {
		s, err := e.js.Stream(context.Background(), name)
		if err != nil {
			t.Fatal(err)
		}
		cfgs = append(cfgs, s.CachedInfo().Config)
		if err := e.js.DeleteStream(context.Background(), name); err != nil {
			t.Fatal(err)
		}
	}
	h := startHub(t, e, Config{})
	time.Sleep(100 * time.Millisecond)
	for _, cfg := range cfgs {
		if _, err := e.js.CreateStream(context.Background(), cfg); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	w, err := h.Watch(ctx, Request{Resource: "pods"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	e.pubPods(3)
	if err := recv(w, e.want(Request{Resource: "pods"}), wait); err != nil {
		t.Fatal(err)
	}
}

// TestUndecodableAndForeignMessages: a message whose envelope does not
// decode is skipped by every watch (live, from the ring and from the log),
// and one without cairn's headers (a foreign publisher) is still served,
// by what its envelope says.
func TestUndecodableAndForeignMessages(t *testing.T) {
	e := newEnv(t)
	publish := func(m *nats.Msg) {
		t.Helper()
		if _, err := e.js.PublishMsg(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
	// undecodable: a well-formed subject and header, a broken envelope.
	undecodable := func() {
		ev := events.Event{Revision: events.Revision(e.rev.Add(1)), Resource: "pods", Namespace: "a", Name: "broken"}
		m := nats.NewMsg(ev.Subject())
		m.Data = []byte(`{"revision": not json`)
		m.Header.Set(events.MsgHeaderRevision, ev.Revision.String())
		publish(m)
	}
	// foreign: a valid envelope without the revision header.
	foreign := func() events.Revision {
		ev := &events.Event{Revision: events.Revision(e.rev.Add(1)), Type: events.Added, Version: "v1", Resource: "pods",
			Namespace: "a", Name: "foreign", Object: json.RawMessage(`{}`)}
		data, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		m := nats.NewMsg(ev.Subject())
		m.Data = data
		publish(m)
		return ev.Revision
	}
	round := func() []events.Revision {
		a := e.pub("", "pods", "", "a", "p1").Revision
		undecodable()
		b := foreign()
		c := e.pub("", "pods", "", "a", "p2").Revision
		return []events.Revision{a, b, c}
	}

	old := round()
	e.pubPods(30) // pushes the first round out of a ring of 20
	h := startHub(t, e, Config{RingSize: 20, HandoffPoll: 10 * time.Millisecond})
	live := watch(t, h, Request{Resource: "pods", Namespace: "a", From: e.head()})
	fromLog := watch(t, h, Request{Resource: "pods", Namespace: "a", Name: "p1", From: 0})
	if err := recv(fromLog, old[:1], wait); err != nil {
		t.Fatalf("watch from the log: %v", err)
	}
	fromLogAll := watch(t, h, Request{Resource: "pods", Namespace: "a", From: old[0] - 1})
	if err := recv(fromLogAll, old, wait); err != nil {
		t.Fatalf("watch from the log: %v", err)
	}

	head := e.head()
	cur := round()
	if err := recv(live, cur, wait); err != nil {
		t.Fatalf("live watch: %v", err)
	}
	fromRing := watch(t, h, Request{Resource: "pods", Namespace: "a", From: head})
	if err := recv(fromRing, cur, wait); err != nil {
		t.Fatalf("watch from the ring: %v", err)
	}
	if err := quiet(fromRing, 50*time.Millisecond); err != nil {
		t.Fatalf("watch from the ring: %v", err)
	}
}
