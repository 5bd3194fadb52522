package publish_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/events/publish"
)

// publishBogus publishes ev directly, as a buggy publisher would, without a
// Nats-Msg-Id so that deduplication does not hide it.
func publishBogus(t *testing.T, js jetstream.JetStream, ev *events.Event) {
	t.Helper()
	data, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	m := nats.NewMsg(ev.Subject())
	m.Data = data
	m.Header.Set(events.MsgHeaderRevision, ev.Revision.String())
	m.Header.Set(events.MsgHeaderType, string(ev.Type))
	if _, err := js.PublishMsg(context.Background(), m); err != nil {
		t.Fatal(err)
	}
}

func TestVerifyDetects(t *testing.T) {
	type fixture struct {
		e      *env
		keys   []string
		noEvt  int64 // a revision with no API-object change
		events []*events.Event
	}
	for _, tc := range []struct {
		name   string
		inject func(t *testing.T, f *fixture)
		want   func(r *publish.Report) []publish.Problem
	}{
		{
			name: "change never published",
			inject: func(t *testing.T, f *fixture) {
				mustWrite(t, f.e.cli, f.keys[0], pod("ns", "a", "", 9), meta(f.keys[0], "update", "x"))
			},
			want: func(r *publish.Report) []publish.Problem { return r.Missing },
		},
		{
			name: "event published twice",
			inject: func(t *testing.T, f *fixture) {
				publishBogus(t, f.e.js, f.events[1])
			},
			want: func(r *publish.Report) []publish.Problem { return r.Duplicated },
		},
		{
			name: "event out of order",
			inject: func(t *testing.T, f *fixture) {
				ev := *f.events[0]
				ev.Revision = events.Revision(f.noEvt)
				publishBogus(t, f.e.js, &ev)
			},
			want: func(r *publish.Report) []publish.Problem { return r.OutOfOrder },
		},
		{
			name: "event for no change",
			inject: func(t *testing.T, f *fixture) {
				ev := *f.events[0]
				ev.Revision = events.Revision(f.noEvt)
				ev.Name = "ghost"
				publishBogus(t, f.e.js, &ev)
			},
			want: func(r *publish.Report) []publish.Problem { return r.Unexpected },
		},
		{
			name: "object differs",
			inject: func(t *testing.T, f *fixture) {
				// A change in etcd, and an event for it with another object.
				rev := mustWrite(t, f.e.cli, f.keys[1], pod("ns", "b", "node-9", 7), meta(f.keys[1], "update", "x"))
				ev := *f.events[len(f.events)-1]
				ev.Revision, ev.Type = events.Revision(rev), events.Modified
				ev.Object = json.RawMessage(pod("ns", "b", "node-8", 7))
				publishBogus(t, f.e.js, &ev)
			},
			want: func(r *publish.Report) []publish.Problem { return r.Mismatched },
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			f := &fixture{e: e}
			f.keys = []string{events.RegistryKey("", "pods", "ns", "a"), events.RegistryKey("", "pods", "ns", "b")}
			mustWrite(t, e.cli, f.keys[0], pod("ns", "a", "", 1), meta(f.keys[0], "create", "x"))
			pr, err := e.cli.Put(context.Background(), "/cairn/unrelated", "x")
			if err != nil {
				t.Fatal(err)
			}
			f.noEvt = pr.Header.Revision
			last := mustWrite(t, e.cli, f.keys[1], pod("ns", "b", "", 1), meta(f.keys[1], "create", "x"))
			if tc.name == "event for no change" {
				// Keep the ghost in order: its revision is the newest.
				pr, err := e.cli.Put(context.Background(), "/cairn/unrelated", "y")
				if err != nil {
					t.Fatal(err)
				}
				f.noEvt = pr.Header.Revision
			}
			pub := e.startPublisher(t, publish.PublisherConfig{})
			e.waitPublished(t, last)
			pub.halt()
			verifyOK(t, e)
			f.events = tailAll(t, e.js, events.TailOptions{})

			tc.inject(t, f)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			rep, err := publish.Verify(ctx, e.cli, e.js)
			if err != nil {
				t.Fatal(err)
			}
			w := &testWriter{t: t}
			_ = rep.Write(w)
			if rep.OK() || len(tc.want(rep)) == 0 {
				t.Errorf("Verify did not report the injected fault")
			}
		})
	}
}

// compactRevision is etcd's compact revision, 0 if never compacted.
func compactRevision(t *testing.T, cli *clientv3.Client) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, ok := <-cli.Watch(ctx, "", clientv3.WithPrefix(), clientv3.WithRev(1))
	if !ok {
		t.Fatal("watch closed")
	}
	return resp.CompactRevision
}

func TestCompactorStaysBehindTheLog(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	comp := publish.NewCompactor(e.cli, e.js, publish.CompactorConfig{Interval: 100 * time.Millisecond}, testLogger(t))
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = comp.Run(ctx)
	}()
	defer func() { cancel(); <-done }()

	pub := e.startPublisher(t, publish.PublisherConfig{})
	w := startWriter(t, e.cli, time.Millisecond)
	deadline := time.Now().Add(10 * time.Second)
	for compactRevision(t, e.cli) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("never compacted")
		}
		time.Sleep(50 * time.Millisecond)
	}
	// With the publisher stopped, compaction must not pass the log.
	pub.halt()
	time.Sleep(500 * time.Millisecond)
	last, err := events.LastPublishedRevision(context.Background(), e.js)
	if err != nil {
		t.Fatal(err)
	}
	if c := compactRevision(t, e.cli); c >= int64(last) {
		t.Fatalf("compacted to %d, log ends at %d", c, last)
	}
	// The next publisher resumes with no gap.
	e.startPublisher(t, publish.PublisherConfig{})
	w.halt()
	lastW, _ := w.lastRev()
	e.waitPublished(t, lastW)
	rep := verifyOK(t, e)
	if rep.CompactRevision == 0 {
		t.Error("Verify saw no compaction")
	}
}
