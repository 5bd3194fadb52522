// Package watchhub serves Kubernetes watches from the event log.
//
// The apiserver answers every watch through a Hub, never through per-client
// etcd watches, so the cost of a watch is a filter over events already in
// memory, and a client that reconnects resumes from the log.
//
// # How it works
//
// A Hub runs ONE ordered JetStream consumer per stream (events.Stream and
// events.LeaseStream). On start it pre-fills a ring with the last
// Config.RingSize messages of each stream, then follows the end of the log.
// Each message is appended to the ring and pushed to the queue of every
// live watcher whose Request matches (watchers are indexed by group and
// resource). Ordering and matching need only the revision (the
// Cairn-Revision header) and the subject's fields, so the envelope is
// decoded only when a watcher wants the event, once, into an *events.Event
// that every watcher shares read-only: an apiserver nobody watches pods
// through does not decode pod events. Head reports the revision of the
// last event seen on a stream; WaitFor blocks until it reaches a revision.
//
// Watch(ctx, Request{..., From: R}) delivers every matching event with
// revision > R. Where the events come from depends on R:
//
//   - R is at or after the ring's start (or at or after the head): the ring
//     is replayed and the watcher goes live in one step under the tail's
//     lock, so the replay and the live events neither overlap nor leave a
//     gap.
//   - R is older than the ring but still in the log: events.SeekRevision
//     finds the first sequence with revision > R and a dedicated ordered
//     consumer, filtered by the server with events.Filter, reads from there
//     and delivers with flow control. As soon as the ring holds every
//     message after the last one read, the watcher is handed to the live
//     fan-out (the handoff is also a single step under the tail's lock) and
//     the dedicated consumer is stopped. Idle readers retry the handoff
//     every Config.HandoffPoll, using one direct get to skip log ranges
//     with nothing for the watch.
//   - R is older than the log keeps: Watch returns an error wrapping
//     events.ErrTooOld; the apiserver answers 410 Gone and the client
//     relists.
//   - R is in the future: the watcher goes live at once and receives
//     events once they pass R.
//
// # Contract
//
// Ordering: each watcher receives its events in revision order, with no gap
// and no duplicate relative to the log, also across the replay/live and
// catch-up/live handoffs. Events from the two streams are never mixed in
// one watcher: a Request for coordination.k8s.io/leases reads the lease
// stream, any other the main stream. The lease stream keeps only the
// latest message per lease, so a lease watcher may miss a renewal that a
// later one replaced before the hub read it; it always receives the latest
// version of every lease, in revision order and without duplicates.
//
// Progress: Watcher.Events is unbuffered, so an event counts as sent when
// the client has received it. Watcher.Progress is the revision up to which
// every matching event has been sent: the hub's head once the watcher has
// nothing queued; use it for BOOKMARK events.
//
// Slow clients: the hub never blocks on a watcher. Each has a queue bounded
// by Config.WatcherBuffer; a watcher that falls further behind is ended
// with ErrSlow (Events is closed, Err reports it). Kubernetes closes such
// watches too; the client re-watches from its last resourceVersion, which
// the ring or the log then serves. A replay from the ring may exceed the
// bound; only live events count against it. A catch-up reader is
// flow-controlled by the client instead and is never ended for slowness.
//
// Thread-safety: all methods of Hub and Watcher are safe for concurrent
// use. Events must not be modified.
//
// Lifecycle: Run blocks until its context is done. Every goroutine (the
// two tails, one per watcher) is owned by the Hub and waited for: when Run
// returns, every watcher has been ended with ErrClosed and has exited. A
// watcher also ends when the context passed to Watch is done (Err is the
// context's error) or on Stop (Err is nil). Watch and WaitFor wait until
// the hub has caught up with the log on start.
//
// Errors: ErrTooOld (from package events) for a revision older than the
// log; ErrSlow; ErrClosed; ErrUnknownStream from Head and WaitFor; context
// errors; NATS errors wrapped with a "watchhub:" prefix.
//
// Limits: if a stream is deleted and recreated (sequences restart), the
// hub does not notice; restart it. A stream emptied by its limits cannot
// tell which revisions it lost, so a watch from before that point starts at
// the end of the log rather than failing (see events.SeekRevision).
// Undecodable messages are logged and skipped by every path alike.
package watchhub
