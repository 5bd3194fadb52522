package events_test

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/events"
)

func TestReader(t *testing.T) {
	js, s := seekStream(t, events.Stream)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	t.Run("empty stream ends at once", func(t *testing.T) {
		err := events.Read(ctx, js, events.ReadOptions{Stream: events.Stream}, func(m *events.Msg) error {
			t.Errorf("got message %d from an empty stream", m.Seq)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	})

	var seqs []uint64
	for rev := events.Revision(10); rev < 20; rev++ {
		seqs = append(seqs, seekPublish(t, js, rev))
	}
	// Pod p15's subject only.
	one := events.Filter("", "pods", "", "ns", "p15")

	for _, tc := range []struct {
		name    string
		opts    events.ReadOptions
		wantRev []events.Revision
	}{
		{"everything", events.ReadOptions{Stream: events.Stream}, []events.Revision{10, 11, 12, 13, 14, 15, 16, 17, 18, 19}},
		{"from a sequence", events.ReadOptions{Stream: events.Stream, FromSeq: seqs[7]}, []events.Revision{17, 18, 19}},
		{"past the end", events.ReadOptions{Stream: events.Stream, FromSeq: seqs[9] + 1}, nil},
		{"filtered on the server", events.ReadOptions{Stream: events.Stream, Filters: []string{one}}, []events.Revision{15}},
		{"filtered, nothing after the start", events.ReadOptions{Stream: events.Stream, Filters: []string{one}, FromSeq: seqs[6]}, nil},
		{"small buffer", events.ReadOptions{Stream: events.Stream, Buffer: 2}, []events.Revision{10, 11, 12, 13, 14, 15, 16, 17, 18, 19}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []events.Revision
			err := events.Read(ctx, js, tc.opts, func(m *events.Msg) error {
				p, err := m.Position()
				if err != nil {
					return err
				}
				ev, err := m.Event()
				if err != nil {
					return err
				}
				if p.Rev != ev.Revision {
					t.Errorf("seq %d: position %d, event revision %d", m.Seq, p.Rev, ev.Revision)
				}
				got = append(got, p.Rev)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.wantRev) {
				t.Fatalf("got revisions %v, want %v", got, tc.wantRev)
			}
			for i := range got {
				if got[i] != tc.wantRev[i] {
					t.Fatalf("got revisions %v, want %v", got, tc.wantRev)
				}
			}
		})
	}

	t.Run("fn's error stops the read", func(t *testing.T) {
		stop := errors.New("stop")
		n := 0
		err := events.Read(ctx, js, events.ReadOptions{Stream: events.Stream}, func(*events.Msg) error {
			n++
			return stop
		})
		if !errors.Is(err, stop) || n != 1 {
			t.Fatalf("err %v after %d messages, want stop after 1", err, n)
		}
	})

	t.Run("follow delivers what comes later and survives a deadline", func(t *testing.T) {
		r, err := events.NewReader(ctx, js, events.ReadOptions{Stream: events.Stream, FromSeq: seqs[9] + 1, Follow: true})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Stop()
		short, cancelShort := context.WithTimeout(ctx, 100*time.Millisecond)
		_, err = r.Next(short)
		cancelShort()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Next with nothing to read: %v, want a deadline", err)
		}
		want := seekPublish(t, js, 20)
		m, err := r.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if m.Seq != want || m.Pending != 0 {
			t.Fatalf("got seq %d pending %d, want seq %d pending 0", m.Seq, m.Pending, want)
		}
	})

	t.Run("a stopped reader leaves no consumer on the server", func(t *testing.T) {
		r, err := events.NewReader(ctx, js, events.ReadOptions{Stream: events.Stream})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.Next(ctx); err != nil {
			t.Fatal(err)
		}
		r.Stop()
		r.Stop()
		if _, err := r.Next(ctx); !errors.Is(err, io.EOF) {
			t.Fatalf("Next after Stop: %v, want EOF", err)
		}
		deadline := time.Now().Add(5 * time.Second)
		for {
			info, err := s.Info(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if info.State.Consumers == 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d consumers left on the stream", info.State.Consumers)
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}
