// Package crashtest holds the apiserver-level failure test of cairn's log:
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
// The package has no code besides its tests. The test is skipped with
// -short; it takes about a minute.
package crashtest
