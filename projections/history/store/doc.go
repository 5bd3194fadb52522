// Package store is the persistent history projection: a bbolt file fed from
// the log (stream CAIRN) by an Ingester.
//
// # Ingest
//
// The Ingester reads the log with an ordered consumer starting after the
// stream sequence of the last event stored, and writes events in batches:
// one bbolt transaction per batch (at most IngestConfig.BatchSize events,
// and as soon as the consumer has caught up). The batch's progress (stream
// sequence and revision) is committed in the same transaction, so after a
// crash or a restart ingest resumes exactly after the last committed event:
// nothing is skipped and nothing is stored twice. Open with Options.Rebuild
// to start again from the oldest event of the log.
//
// Leases (stream CAIRN_LEASES) are heartbeats and are not ingested.
//
// # Layout
//
// Every event is stored once, by position (revision and index within the
// revision), as the envelope published on the log (s2-compressed when it is
// large). Indexes map object key, uid, actor, time, correlation id and
// causation id to positions; owners map to the uids of their dependents
// (ownerReferences), and event ids to positions. A compact Summary of each
// event (the envelope without the object) backs audit queries without
// reading objects.
//
// # Queries
//
// View runs a read transaction (a consistent snapshot); reads never block
// ingest. Changed signals each commit, for followers.
package store
