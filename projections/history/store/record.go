package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/events"
)

// Pos is the place of an event in the log: its revision and its index among
// the events of that revision (0 unless one transaction changed several
// objects). Positions order the log.
type Pos struct {
	Rev events.Revision `json:"revision"`
	Idx uint16          `json:"index,omitempty"`
}

// posLen is the length of an encoded Pos.
const posLen = 10

// Less orders positions.
func (p Pos) Less(q Pos) bool { return p.Rev < q.Rev || (p.Rev == q.Rev && p.Idx < q.Idx) }

// String is the Nats-Msg-Id of the event at p.
func (p Pos) String() string { return events.Position{Rev: p.Rev, Index: int(p.Idx)}.MsgID() }

// bytes encodes p so that byte order is log order.
func (p Pos) bytes() []byte {
	b := make([]byte, posLen)
	binary.BigEndian.PutUint64(b, uint64(p.Rev))
	binary.BigEndian.PutUint16(b[8:], p.Idx)
	return b
}

func decodePos(b []byte) Pos {
	if len(b) < posLen {
		return Pos{}
	}
	return Pos{Rev: events.Revision(binary.BigEndian.Uint64(b)), Idx: binary.BigEndian.Uint16(b[8:])}
}

// MaxPos is after every position of revision rev.
func MaxPos(rev events.Revision) Pos { return Pos{Rev: rev, Idx: ^uint16(0)} }

// ParsePos parses a Nats-Msg-Id ("1234" or "1234-2", events.ParseMsgID).
func ParsePos(id string) (Pos, error) {
	p, err := events.ParseMsgID(id)
	if err != nil {
		return Pos{}, fmt.Errorf("store: %w", err)
	}
	if p.Index > math.MaxUint16 {
		return Pos{}, fmt.Errorf("store: message id %q: index out of range: %w", id, events.ErrBadRevision)
	}
	return Pos{Rev: p.Rev, Idx: uint16(p.Index)}, nil
}

// ObjKey names an object: group ("" for core), resource, namespace (""
// when cluster-scoped) and name.
type ObjKey struct {
	Group     string `json:"group"`
	Resource  string `json:"resource"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
}

func (k ObjKey) String() string {
	g := k.Group
	if g == "" {
		g = "core"
	}
	return g + "/" + k.Resource + "/" + k.Namespace + "/" + k.Name
}

// KeyOf is the key of the object an event changed.
func KeyOf(e *events.Event) ObjKey {
	return ObjKey{Group: e.Group, Resource: e.Resource, Namespace: e.Namespace, Name: e.Name}
}

// ParseObjKey reverses ObjKey.String.
func ParseObjKey(s string) (ObjKey, bool) {
	parts := strings.SplitN(s, "/", 4)
	if len(parts) != 4 {
		return ObjKey{}, false
	}
	g := parts[0]
	if g == "core" {
		g = ""
	}
	return ObjKey{Group: g, Resource: parts[1], Namespace: parts[2], Name: parts[3]}, true
}

// Summary is what the audit index keeps of every event: everything in the
// envelope except the object.
type Summary struct {
	Pos           Pos         `json:"pos"`
	Time          time.Time   `json:"time"`
	Type          events.Type `json:"type"`
	Verb          string      `json:"verb"`
	User          string      `json:"user"`
	Group         string      `json:"group,omitempty"`
	Resource      string      `json:"resource"`
	Kind          string      `json:"kind"`
	Namespace     string      `json:"namespace,omitempty"`
	Name          string      `json:"name"`
	UID           string      `json:"uid,omitempty"`
	ID            string      `json:"id"`
	CausationID   string      `json:"causationID,omitempty"`
	CorrelationID string      `json:"correlationID,omitempty"`
	SourceIP      string      `json:"sourceIP,omitempty"`
}

// Key is the object the summarised event changed.
func (s *Summary) Key() ObjKey {
	return ObjKey{Group: s.Group, Resource: s.Resource, Namespace: s.Namespace, Name: s.Name}
}

// VerbOf is the API verb of an event: the envelope's verb, or one derived
// from the type for writes that did not come through the apiserver.
func VerbOf(e *events.Event) string {
	if e.Verb != "" {
		return e.Verb
	}
	switch e.Type {
	case events.Added:
		return "create"
	case events.Deleted:
		return "delete"
	}
	return "update"
}

// SummaryOf summarises an event at p.
func SummaryOf(p Pos, e *events.Event) Summary {
	return Summary{
		Pos: p, Time: e.Time, Type: e.Type, Verb: VerbOf(e), User: e.Actor.User,
		Group: e.Group, Resource: e.Resource, Kind: e.Kind, Namespace: e.Namespace, Name: e.Name,
		UID: e.UID, ID: e.ID, CausationID: e.CausationID, CorrelationID: e.CorrelationID, SourceIP: e.SourceIP,
	}
}

var typeCodes = map[events.Type]byte{events.Added: 'A', events.Modified: 'M', events.Deleted: 'D'}

func typeOf(b byte) events.Type {
	switch b {
	case 'A':
		return events.Added
	case 'D':
		return events.Deleted
	}
	return events.Modified
}

// encode is a compact binary form: position, type, time, then the strings,
// each length-prefixed.
func (s *Summary) encode() []byte {
	strs := s.strings()
	n := posLen + 1 + binary.MaxVarintLen64
	for _, x := range strs {
		n += binary.MaxVarintLen32 + len(*x)
	}
	b := make([]byte, 0, n)
	b = append(b, s.Pos.bytes()...)
	b = append(b, typeCodes[s.Type])
	b = binary.AppendVarint(b, s.Time.UnixNano())
	for _, x := range strs {
		b = binary.AppendUvarint(b, uint64(len(*x)))
		b = append(b, *x...)
	}
	return b
}

func (s *Summary) strings() []*string {
	return []*string{&s.Verb, &s.User, &s.Group, &s.Resource, &s.Kind, &s.Namespace, &s.Name,
		&s.UID, &s.ID, &s.CausationID, &s.CorrelationID, &s.SourceIP}
}

var errCorrupt = errors.New("store: corrupt summary")

func decodeSummary(b []byte) (Summary, error) {
	var s Summary
	if len(b) < posLen+2 {
		return s, errCorrupt
	}
	s.Pos = decodePos(b)
	s.Type = typeOf(b[posLen])
	b = b[posLen+1:]
	ns, n := binary.Varint(b)
	if n <= 0 {
		return s, errCorrupt
	}
	s.Time = time.Unix(0, ns).UTC()
	b = b[n:]
	for _, x := range s.strings() {
		l, n := binary.Uvarint(b)
		if n <= 0 || uint64(len(b)-n) < l {
			return s, errCorrupt
		}
		*x = string(b[n : n+int(l)])
		b = b[n+int(l):]
	}
	return s, nil
}
