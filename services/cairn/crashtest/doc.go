// Package crashtest holds the process-level failure tests of cairn's log:
// TestAPIServerCrash runs the real cairn binary as `cairn apiserver` (with
// its in-process publisher) against an etcd with fsync and a NATS server,
// drives a concurrent write load through the HTTP API with client-go, kills
// the apiserver with SIGKILL at random moments at least 20 times, restarting
// it each time, and then checks the invariants rather than "it came back":
//
//   - `cairn events verify` passes: the CAIRN stream holds every committed
//     revision exactly once, in order, and matches etcd;
//   - every write the API acknowledged (a 2xx response) is on the log
//     exactly once, at the resourceVersion the API returned, with the right
//     type, verb, object and actor; every acknowledged delete is the last
//     event of its key;
//   - every object's events run ADDED, MODIFIED..., and at most one DELETED
//     at the end.
//
// TestUpCrash does the same to `cairn up --node=false` itself (embedded
// etcd and NATS, the controllers and the scheduler), 13 kills of which three
// hit a start before it was ready, and also requires readiness to tell the
// truth: when a restarted server's /readyz first says ok, a write made then
// is on the log within 2 s. It logs min, median and max of the time from
// start to ready and from ready to that write on the log.
//
// The package has no code besides its tests. The tests are skipped with
// -short; each takes about a minute.
package crashtest
