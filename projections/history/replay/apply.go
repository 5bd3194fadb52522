package replay

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cairn-dev/cairn/events"
)

// applier applies the log to the destination, one etcd transaction per
// logged revision.
type applier struct {
	cfg    *Config
	dst    *dest
	leases []*srcMsg // lease events not applied yet, in order
	group  []*srcMsg // the events of the revision being collected
	head   int64     // the destination etcd's revision
	rep    *Report
}

func (a *applier) run(ctx context.Context) error {
	resp, err := a.dst.cli.Get(ctx, PadKey)
	if err != nil {
		return fmt.Errorf("replay: etcd: %w", err)
	}
	a.head = resp.Header.Revision
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
	return a.apply(ctx)
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

// add collects m into its revision's group, applying the previous group
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

// apply commits the collected revision at exactly its revision, after
// padding the revisions before it that the log has no event for.
func (a *applier) apply(ctx context.Context) error {
	if len(a.group) == 0 {
		return nil
	}
	rev := int64(a.group[0].pos.Rev)
	if a.head >= rev {
		return fmt.Errorf("replay: revision %d: destination etcd is already at %d", rev, a.head)
	}
	if err := a.pad(ctx, rev-1-a.head); err != nil {
		return err
	}
	ops := make([]clientv3.Op, 0, len(a.group)+1)
	for _, m := range a.group {
		e := m.ev
		key := events.RegistryKey(e.Group, e.Resource, e.Namespace, e.Name)
		if e.Type == events.Deleted {
			ops = append(ops, clientv3.OpDelete(key))
			continue
		}
		val, err := StripResourceVersion(e.Object, e.Revision)
		if err != nil {
			return err
		}
		ops = append(ops, clientv3.OpPut(key, string(val)))
	}
	meta, err := json.Marshal(writeMeta(a.group[0].ev))
	if err != nil {
		return fmt.Errorf("replay: revision %d: %w", rev, err)
	}
	ops = append(ops, clientv3.OpPut(events.MetaKey, string(meta)))
	resp, err := a.dst.cli.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return fmt.Errorf("replay: revision %d: %w", rev, err)
	}
	if resp.Header.Revision != rev {
		return fmt.Errorf("replay: revision %d committed at %d", rev, resp.Header.Revision)
	}
	a.head = rev
	for _, m := range a.group {
		if err := a.dst.copyMsg(ctx, m.msg); err != nil {
			return err
		}
	}
	a.rep.Events += len(a.group)
	a.rep.Revisions++
	a.rep.Head = events.Revision(rev)
	a.group = a.group[:0]
	return nil
}

// writeMeta is the metadata the apiserver committed with the change: the
// event of index 0 owns it.
func writeMeta(e *events.Event) *events.WriteMeta {
	return &events.WriteMeta{
		ID: e.ID, Verb: e.Verb, Actor: e.Actor, AuditID: e.AuditID, CausationID: e.CausationID,
		CorrelationID: e.CorrelationID, SourceIP: e.SourceIP, Time: e.Time,
		Key: events.RegistryKey(e.Group, e.Resource, e.Namespace, e.Name),
	}
}

// pad commits n puts of PadKey, concurrently (their order does not
// matter), so that the next transaction gets the next logged revision.
func (a *applier) pad(ctx context.Context, n int64) error {
	if n <= 0 {
		return nil
	}
	const workers = 32
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	next := make(chan struct{})
	for range min(n, workers) {
		wg.Go(func() {
			for range next {
				if _, err := a.dst.cli.Put(ctx, PadKey, ""); err != nil {
					mu.Lock()
					firstErr = cmpErr(firstErr, err)
					mu.Unlock()
				}
			}
		})
	}
	for range n {
		next <- struct{}{}
	}
	close(next)
	wg.Wait()
	if firstErr != nil {
		return fmt.Errorf("replay: pad: %w", firstErr)
	}
	a.head += n
	a.rep.Pads += int(n)
	return nil
}

func cmpErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}
