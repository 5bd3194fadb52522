// Package history holds cairn's history projections: read models built from
// the log (stream CAIRN) that answer "what happened, who did it and what did
// it cause".
//
//   - store: the persistent projection (bbolt). It consumes the log with an
//     ordered consumer from the last sequence it stored and indexes every
//     event by revision, object key, uid, actor, time, correlation and
//     causation id. It survives restarts and can be rebuilt from scratch.
//   - timeline: the life of one object and its causal chain (Deployment ->
//     ReplicaSets -> Pods -> binding -> running, and up from a Pod to the
//     user write that started it), with diffs and per-step latencies.
//   - audit: who changed what and when, filtered by user, verb, kind,
//     namespace and time.
//   - travel: objects as they were at a revision or time, and diffs.
//   - replay: a fresh etcd (and log) data directory rebuilt from the log
//     alone, with the same revisions, that `cairn up` serves.
//   - latency: Prometheus histograms (creation->scheduled,
//     scheduled->running, apply->all-ready) fed by the store's ingest.
//   - web: the JSON API and the timeline page (SVG, live via SSE).
//   - cli: the cairn subcommands timeline, audit, get --at, diff, replay.
package history
