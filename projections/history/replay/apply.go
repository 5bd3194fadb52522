package replay

import (
	"context"
	"encoding/json"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cairn-dev/cairn/events"
)

// applier turns the log into the destination's transactions, one per
// logged revision, padding the revisions the log has no event for.
type applier struct {
	cfg    *Config
	dst    *dest
	chain  *chain
	leases []*srcMsg // lease events not applied yet, in order
	group  []*srcMsg // the events of the revision being collected
	next   int64     // the revision the next transaction commits at
	// seeds are the leases to write with the pad of a revision (see
	// leaseSeeds).
	seeds map[int64][]*srcMsg
	rep   *Report
}

func (a *applier) run(ctx context.Context) error {
	c, head, err := newChain(ctx, a.dst.etcd.cli, a.landed)
	if err != nil {
		return err
	}
	a.chain, a.next = c, int64(head)+1
	defer c.close()
	err = readAll(ctx, a.cfg.JS, events.Stream, func(m *srcMsg) (bool, error) {
		if err := a.leasesBefore(ctx, m); err != nil {
			return false, err
		}
		if a.cfg.stop(m.ev) {
			return false, nil
		}
		return true, a.add(ctx, m)
	})
	if err != nil {
		return err
	}
	if err := a.leasesBefore(ctx, nil); err != nil {
		return err
	}
	if err := a.apply(ctx); err != nil {
		return err
	}
	if err := c.flush(ctx); err != nil {
		return err
	}
	a.rep.Reordered = c.reordered
	return nil
}

// leasesBefore adds the lease events before m (all of them for nil).
func (a *applier) leasesBefore(ctx context.Context, m *srcMsg) error {
	for len(a.leases) > 0 && (m == nil || a.leases[0].pos.Less(m.pos)) {
		if err := a.add(ctx, a.leases[0]); err != nil {
			return err
		}
		a.leases = a.leases[1:]
	}
	return nil
}

// add collects m into its revision's group, queueing the previous group
// when the revision changes.
func (a *applier) add(ctx context.Context, m *srcMsg) error {
	if len(a.group) > 0 && a.group[0].pos.Rev != m.pos.Rev {
		if err := a.apply(ctx); err != nil {
			return err
		}
	}
	a.group = append(a.group, m)
	return nil
}

// apply queues the collected revision at exactly its revision, after pads
// for the revisions before it that the log has no event for.
func (a *applier) apply(ctx context.Context) error {
	if len(a.group) == 0 {
		return nil
	}
	rev := int64(a.group[0].pos.Rev)
	if a.next > rev {
		return fmt.Errorf("replay: revision %d: destination etcd is already at %d", rev, a.next-1)
	}
	for ; a.next < rev; a.next++ {
		ops := []clientv3.Op{clientv3.OpPut(PadKey, "")}
		for _, m := range a.seeds[a.next] {
			ops = append(ops, clientv3.OpPut(m.key, string(m.val)))
		}
		if err := a.chain.push(ctx, &txn{rev: a.next, pad: true, ops: ops}); err != nil {
			return err
		}
	}
	ops := make([]clientv3.Op, 0, len(a.group)+1)
	for _, m := range a.group {
		if m.del {
			ops = append(ops, clientv3.OpDelete(m.key))
		} else {
			ops = append(ops, clientv3.OpPut(m.key, string(m.val)))
		}
	}
	meta := a.group[0].meta
	if meta == nil {
		var err error
		if meta, err = json.Marshal(writeMeta(a.group[0].ev)); err != nil {
			return fmt.Errorf("replay: revision %d: %w", rev, err)
		}
	}
	ops = append(ops, clientv3.OpPut(events.MetaKey, string(meta)))
	t := &txn{rev: rev, ops: ops, msgs: a.group}
	a.group = nil
	a.next = rev + 1
	return a.chain.push(ctx, t)
}

// landed copies the events of a committed revision to the destination log
// and counts it.
func (a *applier) landed(ctx context.Context, t *txn) error {
	if t.pad {
		a.rep.Pads++
	} else {
		for _, m := range t.msgs {
			if err := a.dst.copyMsg(ctx, m.msg); err != nil {
				return err
			}
		}
		a.rep.Events += len(t.msgs)
		a.rep.Revisions++
	}
	a.rep.Head = events.Revision(t.rev)
	t.ops, t.cmps, t.msgs = nil, nil, nil
	return nil
}

// writeMeta is the metadata the apiserver committed with the change: the
// event of index 0 owns it.
func writeMeta(e *events.Event) *events.WriteMeta {
	return &events.WriteMeta{
		ID: e.ID, Verb: e.Verb, Actor: e.Actor, AuditID: e.AuditID, CausationID: e.CausationID,
		CorrelationID: e.CorrelationID, SourceIP: e.SourceIP, Time: e.Time, Admission: e.Admission,
		Key: events.RegistryKey(e.Group, e.Resource, e.Namespace, e.Name),
	}
}
