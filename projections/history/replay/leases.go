package replay

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/events"
)

// readLeases reads the lease stream (the latest state of each lease) up
// to the target, ordered by position.
func readLeases(ctx context.Context, cfg Config) ([]*srcMsg, error) {
	var out []*srcMsg
	err := readAll(ctx, cfg.JS, events.LeaseStream, func(m *srcMsg) (bool, error) {
		if !cfg.stop(m.ev) {
			out = append(out, m)
		}
		return true, nil
	})
	if err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, err
	}
	slices.SortFunc(out, func(a, b *srcMsg) int {
		if a.pos.Less(b.pos) {
			return -1
		}
		return 1
	})
	return out, nil
}

// leaseSeeds places the leases that come back as modifications.
//
// CAIRN_LEASES keeps only the last change of each lease, so a lease
// renewed since its creation comes back as a MODIFIED event of a key the
// destination does not have: committed alone, it would be a create, and
// `cairn events verify` would rightly see a different change than the
// event. Its earlier changes were at revisions the log has no event for,
// which replay pads; the latest of those pads before the event is one at
// which the lease existed on the original. Replay writes the lease there,
// as of its event (its value then is not in the log), so that the event
// is a modification again. leaseSeeds returns those pads' revisions with
// the leases to write in each.
func leaseSeeds(ctx context.Context, js jetstream.JetStream, leases []*srcMsg) (map[int64][]*srcMsg, error) {
	out := map[int64][]*srcMsg{}
	onLeases := map[events.Revision]bool{}
	for _, m := range leases {
		onLeases[m.pos.Rev] = true
	}
	for _, m := range leases {
		if m.ev.Type != events.Modified {
			continue
		}
		rev, err := lastGapBefore(ctx, js, m.pos.Rev, onLeases)
		if err != nil {
			return nil, err
		}
		if rev > 1 {
			out[int64(rev)] = append(out[int64(rev)], m)
		}
	}
	return out, nil
}

// lastGapBefore is the newest revision below rev (and above 1, the
// revision of an empty etcd) that has an event neither on CAIRN nor among
// the lease revisions; 0 if there is none. It reads CAIRN backwards from
// rev with direct gets of the revision header, as far as the log has
// events at consecutive revisions.
func lastGapBefore(ctx context.Context, js jetstream.JetStream, rev events.Revision, onLeases map[events.Revision]bool) (events.Revision, error) {
	s, err := js.Stream(ctx, events.Stream)
	if err != nil {
		return 0, fmt.Errorf("replay: stream %s: %w", events.Stream, err)
	}
	seq, err := events.SeekRevision(ctx, js, events.Stream, rev)
	if err != nil {
		return 0, fmt.Errorf("replay: lease at %d: %w", rev, err)
	}
	// prev is the revision of the message before seq, 0 before the first.
	prev := func() (events.Revision, error) {
		for seq > 1 {
			seq--
			m, err := s.GetMsg(ctx, seq)
			if errors.Is(err, jetstream.ErrMsgNotFound) {
				continue
			}
			if err != nil {
				return 0, fmt.Errorf("replay: lease at %d: %w", rev, err)
			}
			return events.ParseRevision(m.Header.Get(events.MsgHeaderRevision))
		}
		return 0, nil
	}
	logged, err := prev()
	for cur := rev - 1; cur > 1 && err == nil; cur-- {
		for logged > cur && err == nil {
			logged, err = prev()
		}
		if err == nil && logged != cur && !onLeases[cur] {
			return cur, nil
		}
	}
	return 0, err
}
