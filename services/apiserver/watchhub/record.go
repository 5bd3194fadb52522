package watchhub

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/schemas/codec"
)

// record is one message of a stream as the hub keeps it. The revision
// (from the message's Cairn-Revision header) and the subject's fields are
// all that ordering and matching a watch need; the envelope, the costly
// part, is decoded at most once, by the first watcher that delivers the
// record. A record no watcher wants is never decoded.
type record struct {
	seq uint64
	rev events.Revision
	key events.SubjectKey

	once sync.Once
	data []byte // the envelope until decoded
	ev   *events.Event
}

// newRecord reads msg's revision and subject. A message without them (not
// from cairn's publisher) is decoded at once to find them.
func newRecord(m *events.Msg) (*record, error) {
	rev, err := events.ParseRevision(m.Header.Get(events.MsgHeaderRevision))
	key, ok := events.ParseSubject(m.Subject)
	if err == nil && rev > 0 && ok {
		return &record{seq: m.Seq, rev: rev, key: key, data: m.Data}, nil
	}
	ev, err := decodeEnvelope(m.Data, 0)
	if err != nil {
		return nil, err
	}
	return decodedRecord(m.Seq, ev), nil
}

// decodedRecord is a record of an event already decoded.
func decodedRecord(seq uint64, ev *events.Event) *record {
	r := &record{seq: seq, rev: ev.Revision, key: ev.Key(), ev: ev}
	r.once.Do(func() {})
	return r
}

// event returns the decoded envelope, shared read-only by every watcher, or
// nil if it does not decode: the log contract is broken there, which is
// logged once, and watches go on without the event.
func (r *record) event(log *slog.Logger, stream string) *events.Event {
	r.once.Do(func() {
		ev, err := decodeEnvelope(r.data, r.rev)
		if err != nil {
			log.Error("watchhub: undecodable event skipped", "stream", stream, "seq", r.seq, "revision", r.rev, "err", err)
		}
		r.ev, r.data = ev, nil
	})
	return r.ev
}

// decodeEnvelope decodes an event; rev, if not 0, is its revision as the
// message header gives it, for an envelope without one.
func decodeEnvelope(data []byte, rev events.Revision) (*events.Event, error) {
	ev := new(events.Event)
	if err := codec.Unmarshal(data, ev); err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	if ev.Revision == 0 {
		ev.Revision = rev
	}
	if ev.Revision == 0 {
		return nil, errors.New("decode: event without revision")
	}
	return ev, nil
}
