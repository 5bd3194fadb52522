package events

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// SeekRevision finds where a watch "from resourceVersion rev-1" starts
// reading: the first sequence of stream whose event has revision >= rev.
//
// It binary-searches the stream's sequences with direct gets, reading only
// the Cairn-Revision header (Nats-Msg-Id when the header is missing). Each
// probe asks for the first message at or after a sequence, so sequences
// deleted in the middle of the stream (per-subject limits, manual deletes)
// are stepped over; the returned sequence is always that of a stored
// message, or LastSeq+1.
//
// Results:
//   - the stream is empty, or every stored event has revision < rev:
//     LastSeq+1 (the next sequence the stream will assign), so a consumer
//     started there sees exactly the future events;
//   - the first stored event has revision > rev and the stream has lost
//     messages before it (its first sequence is > 1): ErrTooOld, because
//     events with revisions in [rev, first) may have been among those lost.
//     A stream that still holds sequence 1 has lost nothing, so any rev
//     older than its first event is served from sequence 1;
//   - otherwise the sequence of the first event with revision >= rev.
//
// A stream emptied by limits (FirstSeq > LastSeq) cannot tell which
// revisions it lost; SeekRevision then returns LastSeq+1, not ErrTooOld.
// It costs one stream-info request and about log2(messages) direct gets.
func SeekRevision(ctx context.Context, js jetstream.JetStream, stream string, rev Revision) (uint64, error) {
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return 0, fmt.Errorf("seek %s: %w", stream, err)
	}
	st := s.CachedInfo().State
	if st.Msgs == 0 {
		return st.LastSeq + 1, nil
	}
	next := func(seq uint64) (uint64, Revision, bool, error) {
		// ">" matches every subject: the server returns the first stored
		// message with sequence >= seq.
		m, err := s.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(">"))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return 0, 0, false, nil
		}
		if err != nil {
			return 0, 0, false, fmt.Errorf("seek %s: get %d: %w", stream, seq, err)
		}
		r, err := seekMsgRevision(m.Header)
		if err != nil {
			return 0, 0, false, fmt.Errorf("seek %s: message %d: %w", stream, m.Sequence, err)
		}
		return m.Sequence, r, true, nil
	}

	firstSeq, firstRev, ok, err := next(st.FirstSeq)
	if err != nil {
		return 0, err
	}
	if !ok {
		// Emptied since the info request.
		return st.LastSeq + 1, nil
	}
	if firstRev >= rev {
		if firstRev > rev && firstSeq > 1 {
			return 0, fmt.Errorf("seek %s: revision %d, oldest kept %d: %w", stream, rev, firstRev, ErrTooOld)
		}
		return firstSeq, nil
	}

	// Invariant: the first message at or after lo has revision < rev; the
	// first message at or after hi (hiSeq, or none when hiSeq is LastSeq+1)
	// has revision >= rev.
	lo, hi := firstSeq, st.LastSeq+1
	hiSeq := hi
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		seq, r, ok, err := next(mid)
		if err != nil {
			return 0, err
		}
		switch {
		case !ok || seq >= hi:
			hi = mid
		case r >= rev:
			hi, hiSeq = mid, seq
		default:
			lo = seq
		}
	}
	return hiSeq, nil
}

// seekMsgRevision reads an event's revision from its NATS headers: the
// Cairn-Revision header, or Nats-Msg-Id when that is missing.
func seekMsgRevision(h nats.Header) (Revision, error) {
	v := h.Get(MsgHeaderRevision)
	if v == "" {
		v = h.Get(jetstream.MsgIDHeader)
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("revision header %q: %w", v, ErrBadRevision)
	}
	return Revision(n), nil
}
