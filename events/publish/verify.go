package publish

import (
	"github.com/cairn-dev/cairn/events"

	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Problem is one violation of the log contract found by Verify.
type Problem struct {
	Stream   string          // stream of the message, "" for a change with no message
	Seq      uint64          // stream sequence, 0 if none
	Revision events.Revision // revision of the change or message
	Index    int             // index of the event within its revision
	Key      string          // etcd key of the object, if known
	Detail   string
}

func (p Problem) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "revision=%s", events.Position{Rev: p.Revision, Index: p.Index}.MsgID())
	if p.Stream != "" {
		fmt.Fprintf(&b, " stream=%s seq=%d", p.Stream, p.Seq)
	}
	if p.Key != "" {
		fmt.Fprintf(&b, " key=%s", p.Key)
	}
	if p.Detail != "" {
		b.WriteString(": " + p.Detail)
	}
	return b.String()
}

// Report is the result of Verify.
type Report struct {
	// CompactRevision and HeadRevision bound the etcd history checked:
	// (CompactRevision, HeadRevision].
	CompactRevision events.Revision
	HeadRevision    events.Revision
	// Messages read from CAIRN and CAIRN_LEASES.
	Events, LeaseEvents int
	// Changes is the number of API-object changes in the history checked;
	// Keys the number of objects in etcd compared with the log.
	Changes, Keys int

	// Missing: a change in etcd with no event.
	Missing []Problem
	// Duplicated: a second message for the same revision and index.
	Duplicated []Problem
	// OutOfOrder: a message whose revision is not above its predecessor's.
	OutOfOrder []Problem
	// Unexpected: a message in the checked history that matches no change,
	// or that cannot be decoded.
	Unexpected []Problem
	// Mismatched: an event that differs from etcd (key, type, object), or
	// an object whose last event does not match its current state.
	Mismatched []Problem
}

// OK reports whether no problem was found.
func (r *Report) OK() bool {
	return len(r.Missing)+len(r.Duplicated)+len(r.OutOfOrder)+len(r.Unexpected)+len(r.Mismatched) == 0
}

// Write prints one line per problem and a summary line.
func (r *Report) Write(w io.Writer) error {
	for _, l := range []struct {
		name string
		ps   []Problem
	}{
		{"missing", r.Missing}, {"duplicated", r.Duplicated}, {"out-of-order", r.OutOfOrder},
		{"unexpected", r.Unexpected}, {"mismatched", r.Mismatched},
	} {
		for _, p := range l.ps {
			if _, err := fmt.Fprintf(w, "%s %s\n", l.name, p); err != nil {
				return err
			}
		}
	}
	status := "OK"
	if !r.OK() {
		status = fmt.Sprintf("FAILED (%d missing, %d duplicated, %d out of order, %d unexpected, %d mismatched)",
			len(r.Missing), len(r.Duplicated), len(r.OutOfOrder), len(r.Unexpected), len(r.Mismatched))
	}
	_, err := fmt.Fprintf(w, "verify: %s: %d events on %s, %d on %s; history (%d, %d]: %d changes; %d objects compared\n",
		status, r.Events, events.Stream, r.LeaseEvents, events.LeaseStream, r.CompactRevision, r.HeadRevision, r.Changes, r.Keys)
	return err
}

// storedEvent is one message read back from a stream.
type storedEvent struct {
	stream string
	seq    uint64
	pos    events.Position
	ev     *events.Event
	key    string
}

// Verify checks the log against etcd: that each stream's revisions only
// grow and never repeat; that every API-object change in the etcd history
// still kept has exactly one event and every event there matches a change
// (for Leases: that the latest change of each lease is on CAIRN_LEASES); and
// that the last event of every object matches its current state.
//
// Run it when writes have stopped and the publisher has caught up: changes
// it has not published yet are reported missing.
func Verify(ctx context.Context, cli *clientv3.Client, js jetstream.JetStream) (*Report, error) {
	head, err := cli.Get(ctx, events.RegistryPrefix, clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("publish: verify: read etcd: %w", err)
	}
	r := &Report{HeadRevision: events.Revision(head.Header.Revision), Keys: len(head.Kvs)}
	cairn, err := readStream(ctx, js, events.Stream)
	if err != nil {
		return nil, err
	}
	leases, err := readStream(ctx, js, events.LeaseStream)
	if err != nil {
		return nil, err
	}
	r.Events, r.LeaseEvents = len(cairn), len(leases)
	byPos := map[events.Position]*storedEvent{}
	r.checkOrder(cairn, byPos)
	leaseByPos := map[events.Position]*storedEvent{}
	r.checkOrder(leases, leaseByPos)

	changes, compact, err := readHistory(ctx, cli, r.HeadRevision)
	if err != nil {
		return nil, err
	}
	r.CompactRevision = compact
	r.Changes = len(changes)
	// Objects changed after the snapshot of etcd are not compared: on
	// CAIRN_LEASES the newer event has replaced the one the snapshot needs.
	newer := map[string]bool{}
	for _, msgs := range [][]*storedEvent{cairn, leases} {
		for _, m := range msgs {
			if m.pos.Rev > r.HeadRevision {
				newer[m.key] = true
			}
		}
	}
	r.checkHistory(changes, cairn, byPos, leases, leaseByPos, newer)
	r.checkState(head.Kvs, cairn, leases, newer)
	return r, nil
}

// checkOrder fills byPos and reports duplicates and disorder.
func (r *Report) checkOrder(msgs []*storedEvent, byPos map[events.Position]*storedEvent) {
	var prev events.Position
	for _, m := range msgs {
		p := Problem{Stream: m.stream, Seq: m.seq, Revision: m.pos.Rev, Index: m.pos.Index, Key: m.key}
		if m.ev == nil {
			p.Detail = "undecodable event"
			r.Unexpected = append(r.Unexpected, p)
		}
		if first, dup := byPos[m.pos]; dup {
			p.Detail = fmt.Sprintf("first at seq %d", first.seq)
			r.Duplicated = append(r.Duplicated, p)
			continue
		}
		byPos[m.pos] = m
		if !prev.Less(m.pos) {
			p.Detail = fmt.Sprintf("after revision %s", prev.MsgID())
			r.OutOfOrder = append(r.OutOfOrder, p)
			continue
		}
		prev = m.pos
	}
}

func (r *Report) checkHistory(changes []*outMsg, cairn []*storedEvent, byPos map[events.Position]*storedEvent,
	leases []*storedEvent, leaseByPos map[events.Position]*storedEvent, newer map[string]bool) {
	expected := map[events.Position]bool{}
	latestLease := map[string]*outMsg{}
	for _, c := range changes {
		if c.stream == events.LeaseStream {
			latestLease[c.key] = c
			continue
		}
		expected[c.pos] = true
		p := Problem{Revision: c.pos.Rev, Index: c.pos.Index, Key: c.key}
		m, ok := byPos[c.pos]
		if !ok {
			r.Missing = append(r.Missing, p)
			continue
		}
		r.compareChange(p, c, m)
	}
	for key, c := range latestLease {
		if newer[key] {
			continue
		}
		p := Problem{Revision: c.pos.Rev, Index: c.pos.Index, Key: key}
		m, ok := leaseByPos[c.pos]
		if !ok {
			p.Detail = "latest change of the lease not on " + events.LeaseStream
			r.Missing = append(r.Missing, p)
			continue
		}
		r.compareChange(p, c, m)
		expected[c.pos] = true
	}
	inRange := func(p events.Position) bool { return p.Rev > r.CompactRevision && p.Rev <= r.HeadRevision }
	for _, msgs := range [][]*storedEvent{cairn, leases} {
		for _, m := range msgs {
			if inRange(m.pos) && !expected[m.pos] {
				r.Unexpected = append(r.Unexpected, Problem{Stream: m.stream, Seq: m.seq, Revision: m.pos.Rev,
					Index: m.pos.Index, Key: m.key, Detail: "no such change in etcd"})
			}
		}
	}
}

// compareChange compares an event with the change it records.
func (r *Report) compareChange(p Problem, c *outMsg, m *storedEvent) {
	p.Stream, p.Seq = m.stream, m.seq
	switch {
	case m.ev == nil:
		return // reported as undecodable
	case m.key != c.key:
		p.Detail = "event is for " + m.key
	case m.ev.Type != c.ev.Type:
		p.Detail = fmt.Sprintf("event type %s, change is %s", m.ev.Type, c.ev.Type)
	case !sameObject(m.ev.Object, c.ev.Object):
		p.Detail = "object differs from the change"
	default:
		return
	}
	r.Mismatched = append(r.Mismatched, p)
}

// checkState compares the last event of every object with etcd.
func (r *Report) checkState(kvs []*mvccpb.KeyValue, cairn, leases []*storedEvent, newer map[string]bool) {
	last := map[string]*storedEvent{}
	for _, msgs := range [][]*storedEvent{cairn, leases} {
		for _, m := range msgs {
			if m.ev == nil || m.pos.Rev > r.HeadRevision {
				continue
			}
			if l, ok := last[m.key]; !ok || l.pos.Less(m.pos) {
				last[m.key] = m
			}
		}
	}
	inEtcd := map[string]bool{}
	for _, kv := range kvs {
		key := string(kv.Key)
		if _, _, _, _, ok := events.ParseRegistryKey(key); !ok {
			continue
		}
		inEtcd[key] = true
		if newer[key] {
			continue
		}
		p := Problem{Revision: events.Revision(kv.ModRevision), Key: key}
		m, ok := last[key]
		if !ok {
			p.Detail = "object has no event"
			r.Mismatched = append(r.Mismatched, p)
			continue
		}
		p.Stream, p.Seq, p.Index = m.stream, m.seq, m.pos.Index
		switch {
		case m.pos.Rev != p.Revision:
			p.Detail = fmt.Sprintf("last event at revision %s, object at %d", m.pos.MsgID(), kv.ModRevision)
		case m.ev.Type == events.Deleted:
			p.Detail = "last event is DELETED but the object exists"
		case !sameObject(m.ev.Object, kv.Value):
			p.Detail = "last event's object differs from etcd"
		default:
			continue
		}
		r.Mismatched = append(r.Mismatched, p)
	}
	for key, m := range last {
		if !inEtcd[key] && !newer[key] && m.ev.Type != events.Deleted {
			r.Mismatched = append(r.Mismatched, Problem{Stream: m.stream, Seq: m.seq, Revision: m.pos.Rev,
				Index: m.pos.Index, Key: key, Detail: "last event is " + string(m.ev.Type) + " but the object does not exist"})
		}
	}
}

// sameObject compares two object JSONs ignoring metadata.resourceVersion.
func sameObject(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	for _, v := range []any{x, y} {
		if o, ok := v.(map[string]any); ok {
			if md, ok := o["metadata"].(map[string]any); ok {
				delete(md, "resourceVersion")
			}
		}
	}
	return reflect.DeepEqual(x, y)
}

// readStream reads every message of a stream.
func readStream(ctx context.Context, js jetstream.JetStream, name string) ([]*storedEvent, error) {
	var out []*storedEvent
	err := events.Read(ctx, js, events.ReadOptions{Stream: name}, func(m *events.Msg) error {
		se := &storedEvent{stream: name, seq: m.Seq}
		se.pos, _ = m.Position()
		var ev events.Event
		if json.Unmarshal(m.Data, &ev) == nil && ev.Revision != 0 {
			se.ev = &ev
			se.key = events.RegistryKey(ev.Group, ev.Resource, ev.Namespace, ev.Name)
		}
		out = append(out, se)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("publish: read stream %s: %w", name, err)
	}
	return out, nil
}

// readHistory returns the API-object changes etcd still keeps up to head
// (as events, with their positions) and the compact revision.
func readHistory(ctx context.Context, cli *clientv3.Client, head events.Revision) ([]*outMsg, events.Revision, error) {
	var compact events.Revision
	start := int64(1)
	var out []*outMsg
	for attempt := 0; ; attempt++ {
		if events.Revision(start) > head || head <= 1 {
			return out, compact, nil
		}
		wctx, cancel := context.WithCancel(ctx)
		wch := cli.Watch(wctx, "", clientv3.WithPrefix(), clientv3.WithRev(start), clientv3.WithPrevKV())
		var err error
		done := false
		for resp := range wch {
			if resp.CompactRevision != 0 && attempt < 3 {
				compact = events.Revision(resp.CompactRevision)
				start = resp.CompactRevision + 1
				out = nil
				break
			}
			if err = resp.Err(); err != nil {
				break
			}
			evs := resp.Events
			for len(evs) > 0 {
				rev, one, rest := nextRevision(evs)
				evs = rest
				if rev <= head {
					msgs, berr := buildRevision(rev, one)
					if berr != nil {
						err = berr
						break
					}
					out = append(out, msgs...)
				}
				if rev >= head {
					done = true
				}
			}
			if done || err != nil {
				break
			}
		}
		cancel()
		if err != nil {
			return nil, 0, fmt.Errorf("publish: verify: read etcd history: %w", err)
		}
		if done {
			return out, compact, nil
		}
		if ctx.Err() != nil {
			return nil, 0, ctx.Err()
		}
		if attempt >= 3 {
			return nil, 0, errors.New("publish: verify: etcd history kept being compacted")
		}
	}
}
