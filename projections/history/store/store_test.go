package store_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/projections/history/historytest"
	"github.com/cairn-dev/cairn/projections/history/store"
)

func genPods(g *historytest.Gen, from, n int) []*events.Event {
	var out []*events.Event
	for i := from; i < from+n; i++ {
		out = append(out, g.PodLife("default", i)...)
	}
	return out
}

// stopAfter cancels its context once it has observed n events.
type stopAfter struct {
	n      int64
	seen   atomic.Int64
	cancel context.CancelFunc
}

func (s *stopAfter) Observe(_ *store.Tx, _ *store.Indexed) {
	if s.seen.Add(1) == s.n {
		s.cancel()
	}
}

// countAll counts the events stored and checks each revision once, in order.
func countAll(t *testing.T, st *store.Store) int {
	t.Helper()
	n := 0
	var prev store.Pos
	err := st.View(func(tx *store.Tx) error {
		return tx.ScanAll(store.Pos{}, store.MaxPos(1<<62), func(s store.Summary) bool {
			if !prev.Less(s.Pos) {
				t.Errorf("position %s after %s", s.Pos, prev)
			}
			prev = s.Pos
			n++
			return true
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestRestartCatchUp stops ingest in the middle of the log, publishes more,
// starts again on the same file and checks that every event is stored
// exactly once; then rebuilds from scratch and gets the same.
func TestRestartCatchUp(t *testing.T) {
	js := historytest.StartLog(t)
	g := historytest.NewGen()
	first := genPods(g, 0, 200) // 800 events
	if err := historytest.Publish(t.Context(), js, first); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "history.db")
	st, err := store.Open(path, store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	stop := &stopAfter{n: 333, cancel: cancel}
	in := store.NewIngester(st, js, store.IngestConfig{BatchSize: 50, Observers: []store.Observer{stop}})
	if err := in.Run(ctx); err != nil {
		t.Fatal(err)
	}
	mid := countAll(t, st)
	if mid == 0 || mid >= len(first) {
		t.Fatalf("stopped after %d of %d events; want in between", mid, len(first))
	}
	st.Close()

	second := genPods(g, 200, 100)
	if err := historytest.Publish(t.Context(), js, second); err != nil {
		t.Fatal(err)
	}
	st, err = store.Open(path, store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := store.NewIngester(st, js, store.IngestConfig{BatchSize: 64}).CatchUp(t.Context()); err != nil {
		t.Fatal(err)
	}
	want := len(first) + len(second)
	if got := countAll(t, st); got != want {
		t.Fatalf("after restart: %d events stored, want %d", got, want)
	}
	p, _ := st.Progress()
	if p.Rev != g.Rev || p.Seq != uint64(want) {
		t.Fatalf("progress %+v, want revision %d seq %d", p, g.Rev, want)
	}
	st.Close()

	st, err = store.Open(path, store.Options{NoSync: true, Rebuild: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := countAll(t, st); got != 0 {
		t.Fatalf("rebuilt store holds %d events before ingest", got)
	}
	if err := store.NewIngester(st, js, store.IngestConfig{}).CatchUp(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := countAll(t, st); got != want {
		t.Fatalf("after rebuild: %d events stored, want %d", got, want)
	}
}

// TestFollow checks that a running ingester stores new events as they are
// published and signals each commit.
func TestFollow(t *testing.T) {
	js := historytest.StartLog(t)
	st, err := store.Open(filepath.Join(t.TempDir(), "h.db"), store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- store.NewIngester(st, js, store.IngestConfig{}).Run(ctx) }()
	defer func() { cancel(); <-done }()
	g := historytest.NewGen()
	for round := range 3 {
		changed := st.Changed()
		if err := historytest.Publish(t.Context(), js, g.PodLife("ns", round)); err != nil {
			t.Fatal(err)
		}
		deadline := time.After(10 * time.Second)
		for countAll(t, st) < 4*(round+1) {
			select {
			case <-changed:
				changed = st.Changed()
			case <-deadline:
				t.Fatalf("round %d: events not stored", round)
			}
		}
	}
}

// TestIndexes checks every index on a small log.
func TestIndexes(t *testing.T) {
	js := historytest.StartLog(t)
	g := historytest.NewGen()
	evs := genPods(g, 0, 3) // pods 0..2: revisions 2..13
	if err := historytest.Publish(t.Context(), js, evs); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(filepath.Join(t.TempDir(), "h.db"), store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := store.NewIngester(st, js, store.IngestConfig{BatchSize: 5}).CatchUp(t.Context()); err != nil {
		t.Fatal(err)
	}
	pod1 := store.ObjKey{Resource: "pods", Namespace: "default", Name: "pod-1"}
	err = st.View(func(tx *store.Tx) error {
		tests := []struct {
			name string
			got  any
			want any
		}{
			{"history of pod-1", len(tx.History(pod1, store.Pos{}, store.MaxPos(100))), 4},
			{"by uid", len(tx.ByUID("uid-pod-2")), 4},
			{"effects of a create", len(tx.Effects(evs[0].ID)), 1},
			{"correlated", len(tx.Correlated(evs[4].ID)), 3},
			{"by id", mustPos(tx.ByID(evs[5].ID)), store.Pos{Rev: evs[5].Revision}},
			{"latest at 7", tx.ListAt("", "pods", "default", 7), []store.KeyEntry{
				{Pos: store.Pos{Rev: 7}, Type: events.Modified}}}, // pod-0 deleted at 5
			{"latest at head", len(tx.ListAt("", "pods", "", 100)), 0},
			{"revision at time", tx.RevisionAt(evs[6].Time), evs[6].Revision},
			{"uid key", mustKey(tx.KeyOfUID("uid-pod-1")), pod1},
			{"user summaries", countUser(tx, "bob"), 1},
		}
		for _, tc := range tests {
			if !equal(tc.got, tc.want) {
				t.Errorf("%s: got %v, want %v", tc.name, tc.got, tc.want)
			}
		}
		e, err := tx.Event(store.Pos{Rev: evs[2].Revision})
		if err != nil || e.ID != evs[2].ID || string(e.Object) != string(evs[2].Object) {
			t.Errorf("event %d: %v %+v", evs[2].Revision, err, e)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func mustPos(p store.Pos, _ bool) store.Pos       { return p }
func mustKey(k store.ObjKey, _ bool) store.ObjKey { return k }
func equal(a, b any) bool                         { return fmt.Sprintf("%+v", a) == fmt.Sprintf("%+v", b) }
func countUser(tx *store.Tx, user string) (n int) {
	_ = tx.ScanUser(user, store.Pos{}, store.MaxPos(1<<62), func(store.Summary) bool { n++; return true })
	return n
}

// TestLinger: a batch that has caught up with the log waits Linger after
// the previous write for more events before it is written; the first
// events after a quiet spell are written at once.
func TestLinger(t *testing.T) {
	js := historytest.StartLog(t)
	st, err := store.Open(filepath.Join(t.TempDir(), "h.db"), store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	// Published before ingest starts, so that the four are one batch.
	g := historytest.NewGen()
	if err := historytest.Publish(t.Context(), js, g.PodLife("ns", 0)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- store.NewIngester(st, js, store.IngestConfig{Linger: time.Hour}).Run(ctx) }()
	defer func() { cancel(); <-done }()
	deadline := time.After(10 * time.Second)
	for changed := st.Changed(); countAll(t, st) < 4; changed = st.Changed() {
		select {
		case <-changed:
		case <-deadline:
			t.Fatal("the first events after a quiet spell are not stored")
		}
	}
	// Within the hour after that write, the next events wait.
	if err := historytest.Publish(t.Context(), js, g.PodLife("ns", 1)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	if n := countAll(t, st); n != 4 {
		t.Fatalf("%d events stored within the linger after the previous write, want 4", n)
	}
	p, err := st.Progress()
	if err != nil || p.Seq != 4 {
		t.Fatalf("progress %+v (%v), want seq 4", p, err)
	}
}
