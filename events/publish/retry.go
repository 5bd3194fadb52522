package publish

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/events"
)

// A publish whose acknowledgement did not arrive (timeout, "no response
// from stream" while the stream elects a leader or gains replicas, a
// reconnect) has an unknown outcome: the message may be stored or not.
// The pipeline then publishes the same message again, with the same
// Nats-Msg-Id and the same fence, until JetStream answers for it.
// That is safe whatever happened to the first attempt: the fence stores it
// only right after its predecessor, and the id makes a second copy a
// duplicate within events.DuplicateWindow. Nothing later is counted as
// published (LastPublished, the compactor's bound) before it is
// acknowledged, because acknowledgements are checked in publish order.

// retryBackoff bounds the pause between two attempts.
const retryBackoff = time.Second

// retry publishes f again after its first attempt failed with first, until
// it is known to be stored (nil), or known not to be where it belongs
// (another publisher appended, the message is refused), or the duplicate
// window since the first attempt is nearly over, or the term ends.
func (pl *pipeline) retry(f flight, first error) error {
	ctx := pl.ctx
	id := f.m.pos.MsgID()
	last := first
	// Past the window a second copy would not be recognised as one: let
	// the publisher re-read the tail instead.
	giveUp := f.sent.Add(events.DuplicateWindow - 2*pl.p.cfg.AckTimeout)
	for attempt := 1; ; attempt++ {
		switch retryable(last) {
		case retryNever:
			return last
		case retryCheck:
			// Wrong last sequence: either a predecessor was not stored
			// (then every later publish failed too, and this one is retried
			// now that the predecessor is), or this very message was stored
			// by an attempt whose answer was lost (an R1 stream checks the
			// fences before duplicates): look at its place.
			stored, err := storedAt(ctx, pl.p.js, f.m.stream, f.wantSeq)
			if err == nil && stored != "" {
				if stored == id {
					return nil
				}
				return fmt.Errorf("publish: revision %s: sequence %d of %s holds %s (another publisher): %w", id, f.wantSeq, f.m.stream, stored, first)
			}
			if attempt > 2 && err == nil {
				// The place is still empty after a retry with the
				// predecessor stored: the predecessor is not what the
				// fences expect.
				return last
			}
		}
		if ctx.Err() != nil {
			return last
		}
		if time.Now().After(giveUp) {
			return fmt.Errorf("publish: revision %s unacknowledged for the duplicate window: %w", id, last)
		}
		if attempt > 1 {
			select {
			case <-ctx.Done():
				return last
			case <-time.After(min(time.Duration(attempt)*100*time.Millisecond, retryBackoff)):
			}
		}
		pl.p.log.Warn("publisher: publish outcome unknown; publishing it again with the same id",
			"revision", id, "stream", f.m.stream, "seq", f.wantSeq, "attempt", attempt, "err", last)
		pl.p.metrics.retries.Inc()
		actx, cancel := context.WithTimeout(ctx, pl.p.cfg.AckTimeout)
		ack, err := pl.p.js.PublishMsg(actx, f.m.msg, publishOpts(f.m, f.wantSeq-1)...)
		cancel()
		if err == nil {
			return checkAck(f, ack)
		}
		last = fmt.Errorf("publish: publish revision %s: %w", id, err)
	}
}

type retryKind int

const (
	retryUnknown retryKind = iota // the outcome is unknown: publish again
	retryCheck                    // a fence failed: see what the stream holds, then publish again
	retryNever                    // JetStream refused the message for good
)

func retryable(err error) retryKind {
	var ae *jetstream.APIError
	if !errors.As(err, &ae) {
		if errors.Is(err, errAckMismatch) {
			return retryNever
		}
		return retryUnknown
	}
	switch {
	case ae.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence,
		ae.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant:
		return retryCheck
	case ae.Code >= 500:
		// No leader, cluster unavailable: nothing was stored.
		return retryUnknown
	}
	return retryNever
}

// errAckMismatch marks an acknowledgement that puts the message somewhere
// else than where it belongs.
var errAckMismatch = errors.New("publish: acknowledgement does not match")

// checkAck checks that ack stores f where it belongs.
func checkAck(f flight, ack *jetstream.PubAck) error {
	id := f.m.pos.MsgID()
	switch {
	case ack.Stream != f.m.stream:
		return fmt.Errorf("%w: revision %s stored in stream %s, want %s", errAckMismatch, id, ack.Stream, f.m.stream)
	case ack.Sequence != f.wantSeq && ack.Duplicate:
		return fmt.Errorf("%w: revision %s already on %s at sequence %d", errAckMismatch, id, ack.Stream, ack.Sequence)
	case ack.Sequence != f.wantSeq:
		return fmt.Errorf("%w: revision %s stored at sequence %d, want %d", errAckMismatch, id, ack.Sequence, f.wantSeq)
	}
	return nil
}

// storedAt returns the Nats-Msg-Id of the message at seq of stream, ""
// if there is none. It asks the stream leader (STREAM.MSG.GET), never a
// replica, which may lag behind.
func storedAt(ctx context.Context, js jetstream.JetStream, stream string, seq uint64) (string, error) {
	msg, err := events.GetMsgFromLeader(ctx, js, stream, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return msg.Header.Get(nats.MsgIdHdr), nil
}
