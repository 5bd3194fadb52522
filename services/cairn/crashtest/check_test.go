package crashtest

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/events"
)

// logEvent is one message of the CAIRN stream, decoded.
type logEvent struct {
	seq uint64
	ev  events.Event
	key string
}

// readLog reads the whole CAIRN stream with an ordered consumer and checks
// each message's headers against its envelope.
func readLog(ctx context.Context, t *testing.T, js jetstream.JetStream) []*logEvent {
	t.Helper()
	s, err := js.Stream(ctx, events.Stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs == 0 {
		t.Fatal("the log is empty")
	}
	cons, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy})
	if err != nil {
		t.Fatal(err)
	}
	it, err := cons.Messages()
	if err != nil {
		t.Fatal(err)
	}
	defer it.Stop()
	var out []*logEvent
	for {
		msg, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			t.Fatalf("read the log: %v", err)
		}
		md, err := msg.Metadata()
		if err != nil {
			t.Fatal(err)
		}
		le := &logEvent{seq: md.Sequence.Stream}
		if err := json.Unmarshal(msg.Data(), &le.ev); err != nil {
			t.Fatalf("seq %d: not an event: %v", le.seq, err)
		}
		le.key = events.RegistryKey(le.ev.Group, le.ev.Resource, le.ev.Namespace, le.ev.Name)
		h := msg.Headers()
		rev := le.ev.Revision.String()
		if h.Get(nats.MsgIdHdr) != rev || h.Get(events.MsgHeaderRevision) != rev || h.Get(events.MsgHeaderType) != string(le.ev.Type) {
			t.Errorf("seq %d (%s %s at %d): headers %v do not match the envelope", le.seq, le.ev.Type, le.key, le.ev.Revision, h)
		}
		out = append(out, le)
		if le.seq >= info.State.LastSeq {
			return out
		}
	}
}

// checkLog checks the log against the acknowledged writes: each create and
// update is there exactly once at the revision the API returned, with the
// right type, verb, object and actor; each delete is the one DELETED event of
// its key and its last event; and every key's events run ADDED, MODIFIED...,
// DELETED. user is the actor of the acknowledged writes (in group
// adminGroup). It returns the problems found.
func checkLog(log []*logEvent, acks []ack, user string) []string {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }

	byRev := map[events.Revision][]*logEvent{}
	byKey := map[string][]*logEvent{}
	var prev events.Revision
	for _, le := range log {
		if le.ev.Revision <= prev {
			bad("seq %d: revision %d after %d", le.seq, le.ev.Revision, prev)
		}
		prev = le.ev.Revision
		byRev[le.ev.Revision] = append(byRev[le.ev.Revision], le)
		byKey[le.key] = append(byKey[le.key], le)
	}

	for _, a := range acks {
		if a.verb == "delete" {
			evs := byKey[a.key]
			if len(evs) == 0 || evs[len(evs)-1].ev.Type != events.Deleted {
				bad("acknowledged delete of %s: the key's last event is not DELETED (%s)", a.key, describe(evs))
				continue
			}
			checkActor(bad, a, evs[len(evs)-1], user)
			continue
		}
		evs := byRev[a.rev]
		if len(evs) != 1 {
			bad("acknowledged %s of %s at %d: %d events at that revision, want 1 (%s)", a.verb, a.key, a.rev, len(evs), describe(evs))
			continue
		}
		le := evs[0]
		want := events.Modified
		if a.verb == "create" {
			want = events.Added
		}
		if le.key != a.key || le.ev.Type != want {
			bad("acknowledged %s of %s at %d: event is %s %s", a.verb, a.key, a.rev, le.ev.Type, le.key)
		}
		checkActor(bad, a, le, user)
		var obj struct {
			Metadata struct {
				ResourceVersion string            `json:"resourceVersion"`
				Labels          map[string]string `json:"labels"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(le.ev.Object, &obj); err != nil {
			bad("event at %d: object: %v", a.rev, err)
			continue
		}
		if obj.Metadata.ResourceVersion != a.rev.String() || obj.Metadata.Labels[labelKey] != a.label {
			bad("acknowledged %s of %s at %d (label %s): event object has resourceVersion %q, label %q",
				a.verb, a.key, a.rev, a.label, obj.Metadata.ResourceVersion, obj.Metadata.Labels[labelKey])
		}
	}

	for key, evs := range byKey {
		for i, le := range evs {
			want := events.Modified
			switch {
			case i == 0:
				want = events.Added
			case i == len(evs)-1 && le.ev.Type == events.Deleted:
				want = events.Deleted
			}
			if le.ev.Type != want {
				bad("%s: event %d of %d is %s, want %s (%s)", key, i+1, len(evs), le.ev.Type, want, describe(evs))
				break
			}
		}
	}
	return problems
}

// checkActor checks the verb and actor of an acknowledged write's event.
func checkActor(bad func(string, ...any), a ack, le *logEvent, user string) {
	if le.ev.Verb != a.verb || le.ev.Actor.User != user || !slices.Contains(le.ev.Actor.Groups, adminGroup) {
		bad("acknowledged %s of %s: event at %d has verb %q, actor %+v", a.verb, a.key, le.ev.Revision, le.ev.Verb, le.ev.Actor)
	}
}

func describe(evs []*logEvent) string {
	s := ""
	for i, le := range evs {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%s@%d", le.ev.Type, le.ev.Revision)
	}
	if s == "" {
		return "no events"
	}
	return s
}

// TestCheckLog checks that checkLog finds what it should, on hand-made logs.
func TestCheckLog(t *testing.T) {
	const k = "/registry/core/configmaps/default/a"
	ev := func(seq uint64, rev events.Revision, typ events.Type, verb, label string) *logEvent {
		obj := fmt.Sprintf(`{"metadata":{"resourceVersion":"%d","labels":{%q:%q}}}`, rev, labelKey, label)
		return &logEvent{seq: seq, key: k, ev: events.Event{Revision: rev, Type: typ, Resource: "configmaps",
			Namespace: "default", Name: "a", Verb: verb, Object: json.RawMessage(obj),
			Actor: events.Actor{User: adminUser, Groups: []string{adminGroup}}}}
	}
	good := []*logEvent{ev(1, 10, events.Added, "create", "0"), ev(2, 11, events.Modified, "update", "1"), ev(3, 12, events.Deleted, "delete", "1")}
	acks := []ack{{verb: "create", key: k, rev: 10, label: "0"}, {verb: "update", key: k, rev: 11, label: "1"}, {verb: "delete", key: k}}
	tests := []struct {
		name  string
		log   []*logEvent
		acks  []ack
		wantN int
	}{
		{name: "all there", log: good, acks: acks, wantN: 0},
		{name: "unacknowledged writes are fine", log: good, acks: acks[:1], wantN: 0},
		{name: "missing update", log: []*logEvent{good[0], good[2]}, acks: acks, wantN: 1},
		{name: "duplicate", log: []*logEvent{good[0], good[1], ev(3, 11, events.Modified, "update", "1"), good[2]}, acks: acks, wantN: 2},
		{name: "out of order", log: []*logEvent{good[1], good[0], good[2]}, acks: acks, wantN: 2},
		{name: "delete not last", log: []*logEvent{good[0], good[2], ev(4, 13, events.Modified, "update", "1")}, acks: acks, wantN: 3},
		{name: "wrong label", log: []*logEvent{good[0], ev(2, 11, events.Modified, "update", "7"), good[2]}, acks: acks, wantN: 1},
		{name: "wrong type", log: []*logEvent{good[0], ev(2, 11, events.Added, "update", "1"), good[2]}, acks: acks, wantN: 2},
		{name: "wrong actor", log: []*logEvent{good[0], good[1], {seq: 3, key: k, ev: events.Event{Revision: 12, Type: events.Deleted, Verb: "delete"}}}, acks: acks, wantN: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := checkLog(tt.log, tt.acks, adminUser)
			if len(got) != tt.wantN {
				t.Errorf("checkLog found %d problems, want %d: %q", len(got), tt.wantN, got)
			}
		})
	}
}
