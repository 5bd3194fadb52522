package events

import (
	"fmt"
	"strconv"
	"strings"
)

// Position is the place of one event in the log: its revision and its index
// among the events of that revision (0 for the usual one-object write).
type Position struct {
	Rev   Revision
	Index int
}

// Less orders positions as the log does.
func (p Position) Less(q Position) bool {
	return p.Rev < q.Rev || (p.Rev == q.Rev && p.Index < q.Index)
}

// MsgID is the Nats-Msg-Id of the event at p: the revision, with "-<idx>"
// for the extra objects of a multi-object transaction.
func (p Position) MsgID() string {
	if p.Index == 0 {
		return p.Rev.String()
	}
	return p.Rev.String() + "-" + strconv.Itoa(p.Index)
}

// ParseMsgID reads a Position from a Nats-Msg-Id made by MsgID.
func ParseMsgID(id string) (Position, error) {
	revs, idxs, multi := strings.Cut(id, "-")
	rev, err := ParseRevision(revs)
	if err != nil || revs == "" {
		return Position{}, fmt.Errorf("events: message id %q: %w", id, ErrBadRevision)
	}
	p := Position{Rev: rev}
	if multi {
		n, err := strconv.Atoi(idxs)
		if err != nil || n < 1 {
			return Position{}, fmt.Errorf("events: message id %q: %w", id, ErrBadRevision)
		}
		p.Index = n
	}
	return p, nil
}
