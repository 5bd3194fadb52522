package consumer

import (
	"context"
	"encoding/json"
	"time"

	"github.com/cairn-dev/cairn/events"
)

// gapSet says which changes of a snapshot are a gap in what the tail
// delivered: on for every snapshot after the first, of the objects
// followed (the partitions the cache followed before it).
//
// A cache that gains partitions stops its tail and lists again; the
// objects it already followed that changed between the last event it
// applied and the list come out of the snapshot instead of the log. Their
// changes are events on the log all the same, each made by someone, and
// the work they cause (a Job replacing a pod that succeeded in the gap) is
// the reaction to that event: handlers get it, so the writes carry its
// causation as DESIGN.md's log contract asks. The objects of the new
// partitions get no event: they were not missed, the cache did not follow
// them, and their controllers' keys are queued with the takeover's cause
// once the partitions are ready (Manager.Resync).
type gapSet struct {
	on       bool
	followed *partitionSet
}

// maxGapLookups bounds the log look-ups of one snapshot: past it (a relist
// after the log lost the cache's position, when most of those events are
// gone anyway) the changes get a nil event, as a snapshot's do.
const maxGapLookups = 1000

// gapPublishWait bounds how long a snapshot waits for the log to hold its
// revision before it looks up its gap's events.
const gapPublishWait = 5 * time.Second

// waitGapPublished waits, up to gapPublishWait, until the log holds rev,
// before a snapshot at rev looks up its gap's events there: the list read
// etcd, which the publisher may not have put on the log yet, and a change
// whose event is not published yet is not found. Past the wait the
// changes not found get a nil event.
func (c *Cache[T]) waitGapPublished(ctx context.Context, rev events.Revision) {
	ctx, cancel := context.WithTimeout(ctx, gapPublishWait)
	defer cancel()
	if err := events.WaitPublished(ctx, c.cfg.JS, rev); err != nil {
		c.log.Warn("consumer: the log does not hold the snapshot's revision yet; its gap's changes may have no event", "revision", int64(rev), "err", err)
	}
}

// gapEvent is the event on the log that made the change kind of obj found
// by a snapshot at rev: the last event on obj's subjects, if it is of
// obj's uid and is that change (the revision obj has, or the delete of it
// at or before rev). nil when the log has no such event (compacted, or
// obj changed again after rev: that event comes through the tail).
func (c *Cache[T]) gapEvent(ctx context.Context, obj T, kind events.Type, rev events.Revision) *events.Event {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	s, err := c.cfg.JS.Stream(ctx, c.stream)
	if err != nil {
		return nil
	}
	r := c.cfg.Resource
	msg, err := s.GetLastMsgForSubject(ctx, events.Filter(r.Group, r.Resource, "", obj.GetNamespace(), obj.GetName()))
	if err != nil {
		return nil
	}
	var ev events.Event
	if err := json.Unmarshal(msg.Data, &ev); err != nil || ev.UID != string(obj.GetUID()) {
		return nil
	}
	ev.Object = nil
	switch objRev, _ := events.ParseRevision(obj.GetResourceVersion()); {
	case kind == events.Deleted && ev.Type == events.Deleted && ev.Revision <= rev:
	case kind != events.Deleted && ev.Type != events.Deleted && ev.Revision == objRev:
	default:
		return nil
	}
	return &ev
}
