package events_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/services/embedded/embeddedtest"
)

// seekPublish publishes a bare event with the headers the publisher sets and
// returns its stream sequence.
func seekPublish(t *testing.T, js jetstream.JetStream, rev events.Revision) uint64 {
	t.Helper()
	ev := events.Event{Revision: rev, Type: events.Added, Resource: "pods", Namespace: "ns", Name: "p" + rev.String(), Version: "v1"}
	m := nats.NewMsg(ev.Subject())
	m.Data = []byte(`{"revision":` + rev.String() + `}`)
	m.Header.Set(events.MsgHeaderRevision, rev.String())
	m.Header.Set(jetstream.MsgIDHeader, rev.String())
	ack, err := js.PublishMsg(context.Background(), m)
	if err != nil {
		t.Fatalf("publish %d: %v", rev, err)
	}
	return ack.Sequence
}

func seekStream(t *testing.T, name string) (jetstream.JetStream, jetstream.Stream) {
	t.Helper()
	n := embeddedtest.StartNATS(t)
	js, err := jetstream.New(n.Conn)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name: name, Subjects: []string{"cairn.ev.>"}, AllowDirect: true, Storage: jetstream.MemoryStorage,
	})
	if err != nil {
		t.Fatal(err)
	}
	return js, s
}

func TestSeekRevision(t *testing.T) {
	ctx := context.Background()
	// Revisions 10, 12, 14, ..., 48 at sequences 1..20: gaps in revisions are
	// normal (other keys, the lease stream).
	js, s := seekStream(t, "SEEK")
	if seq, err := events.SeekRevision(ctx, js, "SEEK", 5); err != nil || seq != 1 {
		t.Fatalf("empty stream: got %d, %v; want 1", seq, err)
	}
	for i := 0; i < 20; i++ {
		seekPublish(t, js, events.Revision(10+2*i))
	}
	tests := []struct {
		name string
		rev  events.Revision
		want uint64
	}{
		{"before first, nothing lost", 1, 1},
		{"first exactly", 10, 1},
		{"between", 11, 2},
		{"exact middle", 30, 11},
		{"last", 48, 20},
		{"just past last", 49, 21},
		{"far future", 1000, 21},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := events.SeekRevision(ctx, js, "SEEK", tt.rev)
			if err != nil || got != tt.want {
				t.Fatalf("SeekRevision(%d) = %d, %v; want %d", tt.rev, got, err, tt.want)
			}
		})
	}

	// Delete messages in the middle: 11 (rev 30) and 12 (rev 32).
	for _, seq := range []uint64{11, 12} {
		if err := s.DeleteMsg(ctx, seq); err != nil {
			t.Fatal(err)
		}
	}
	deleted := []struct {
		name string
		rev  events.Revision
		want uint64
	}{
		{"deleted exact", 30, 13},
		{"deleted between", 31, 13},
		{"after deleted", 34, 13},
		{"before deleted", 28, 10},
		{"last still", 48, 20},
	}
	for _, tt := range deleted {
		t.Run(tt.name, func(t *testing.T) {
			got, err := events.SeekRevision(ctx, js, "SEEK", tt.rev)
			if err != nil || got != tt.want {
				t.Fatalf("SeekRevision(%d) = %d, %v; want %d", tt.rev, got, err, tt.want)
			}
		})
	}

	// Purge the first 5 messages (revs 10..18): the oldest kept is 20 at seq 6.
	if err := s.Purge(ctx, jetstream.WithPurgeSequence(6)); err != nil {
		t.Fatal(err)
	}
	purged := []struct {
		name   string
		rev    events.Revision
		want   uint64
		tooOld bool
	}{
		{name: "older than kept", rev: 19, tooOld: true},
		{name: "much older", rev: 1, tooOld: true},
		{name: "oldest kept exactly", rev: 20, want: 6},
		{name: "after oldest", rev: 21, want: 7},
	}
	for _, tt := range purged {
		t.Run(tt.name, func(t *testing.T) {
			got, err := events.SeekRevision(ctx, js, "SEEK", tt.rev)
			if tt.tooOld {
				if !errors.Is(err, events.ErrTooOld) {
					t.Fatalf("SeekRevision(%d) = %d, %v; want ErrTooOld", tt.rev, got, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("SeekRevision(%d) = %d, %v; want %d", tt.rev, got, err, tt.want)
			}
		})
	}

	// Purge everything: an emptied stream answers LastSeq+1.
	if err := s.Purge(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := events.SeekRevision(ctx, js, "SEEK", 5); err != nil || got != 21 {
		t.Fatalf("purged stream: got %d, %v; want 21", got, err)
	}
	if _, err := events.SeekRevision(ctx, js, "NOPE", 5); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("missing stream: %v", err)
	}
}

// TestSeekRevisionSparse checks the search on a stream where most sequences
// are deleted (as in the lease stream, which keeps one message per subject).
func TestSeekRevisionSparse(t *testing.T) {
	ctx := context.Background()
	js, s := seekStream(t, "SPARSE")
	var kept []uint64
	for i := 1; i <= 300; i++ {
		seq := seekPublish(t, js, events.Revision(i*3))
		if i%7 == 0 || i == 1 {
			kept = append(kept, seq)
		}
	}
	keep := map[uint64]bool{}
	for _, k := range kept {
		keep[k] = true
	}
	for seq := uint64(1); seq <= 300; seq++ {
		if !keep[seq] {
			if err := s.DeleteMsg(ctx, seq); err != nil {
				t.Fatal(err)
			}
		}
	}
	for rev := events.Revision(1); rev <= 905; rev++ {
		want := uint64(301)
		for _, k := range kept {
			if events.Revision(k*3) >= rev {
				want = k
				break
			}
		}
		got, err := events.SeekRevision(ctx, js, "SPARSE", rev)
		if err != nil || got != want {
			t.Fatalf("SeekRevision(%d) = %d, %v; want %d", rev, got, err, want)
		}
	}
}
