package travel

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/projections/history/store"
	"github.com/cairn-dev/cairn/projections/history/timeline"
)

// ErrNotFound means the object did not exist at that point.
var ErrNotFound = errors.New("travel: object not found")

// Point is a place in the log: a revision, or a time (resolved to the
// newest revision at or before it).
type Point struct {
	Rev  events.Revision
	Time time.Time
}

// ParsePoint reads a revision ("1234") or an RFC 3339 time.
func ParsePoint(s string) (Point, error) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil && n >= 0 {
		return Point{Rev: events.Revision(n)}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return Point{}, fmt.Errorf("travel: %q is neither a revision nor an RFC 3339 time", s)
	}
	return Point{Time: t}, nil
}

// Resolve turns p into a revision. A zero point is the head.
func (p Point) Resolve(tx *store.Tx) events.Revision {
	switch {
	case p.Rev > 0:
		return p.Rev
	case !p.Time.IsZero():
		return tx.RevisionAt(p.Time)
	}
	return tx.Progress().Rev
}

// State is one object at a point.
type State struct {
	Revision events.Revision `json:"revision"`
	Key      store.ObjKey    `json:"key"`
	Object   json.RawMessage `json:"object"`
}

// Get is the state of key at p.
func Get(tx *store.Tx, key store.ObjKey, p Point) (*State, error) {
	rev := p.Resolve(tx)
	e, ok := tx.LatestAt(key, rev)
	if !ok || e.Type == events.Deleted {
		return nil, fmt.Errorf("%w: %s at revision %d", ErrNotFound, key, rev)
	}
	ev, err := tx.Event(e.Pos)
	if err != nil {
		return nil, err
	}
	return &State{Revision: e.Pos.Rev, Key: key, Object: ev.Object}, nil
}

// List is every object of group/resource (in namespace, if set) at p.
func List(tx *store.Tx, group, resource, namespace string, p Point) (events.Revision, []State, error) {
	rev := p.Resolve(tx)
	var out []State
	for _, e := range tx.ListAt(group, resource, namespace, rev) {
		ev, err := tx.Event(e.Pos)
		if err != nil {
			return 0, nil, err
		}
		out = append(out, State{Revision: e.Pos.Rev, Key: store.KeyOf(ev), Object: ev.Object})
	}
	return rev, out, nil
}

// Delta is the diff of one object between two points.
type Delta struct {
	From    events.Revision   `json:"from"`
	To      events.Revision   `json:"to"`
	FromRev events.Revision   `json:"fromObjectRevision,omitempty"`
	ToRev   events.Revision   `json:"toObjectRevision,omitempty"`
	Changes []timeline.Change `json:"changes"`
}

// Diff compares key at from and at to; a side where the object did not
// exist is empty.
func Diff(tx *store.Tx, key store.ObjKey, from, to Point) (*Delta, error) {
	d := &Delta{From: from.Resolve(tx), To: to.Resolve(tx)}
	var a, b []byte
	if s, err := Get(tx, key, Point{Rev: d.From}); err == nil {
		a, d.FromRev = s.Object, s.Revision
	} else if !errors.Is(err, ErrNotFound) {
		return nil, err
	}
	if s, err := Get(tx, key, Point{Rev: d.To}); err == nil {
		b, d.ToRev = s.Object, s.Revision
	} else if !errors.Is(err, ErrNotFound) {
		return nil, err
	}
	if a == nil && b == nil {
		return nil, fmt.Errorf("%w: %s at %d and at %d", ErrNotFound, key, d.From, d.To)
	}
	d.Changes = timeline.Diff(a, b, 0)
	return d, nil
}
