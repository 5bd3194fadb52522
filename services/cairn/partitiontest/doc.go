// Package partitiontest holds the tests of cairn's servers on clustered etcd and
// NATS, each server on its own test host (a network namespace with its own
// address on a bridge, package ops/topologies), so that a test can cut one
// off or SIGKILL it.
//
// Until `cairn up --join` exists a server is the test binary itself, run
// as a child inside its host's namespace (server_test.go): an embedded
// etcd member (the first starts the cluster, the others join as learners
// and are promoted, embedded.JoinEtcd), an embedded NATS server of one
// cluster (routes to the first, JetStream clustered, streams with 3
// replicas) and the control plane (apiserver, publisher, compactor) on
// them, listening on the host's address.
//
// TestMinorityRefusesWrites cuts one of three servers off from the other
// two: writes through it get a 5xx Status (its etcd member has no quorum)
// and none of them is there after the heal, while writes through the
// majority go on; after the heal writes through it are accepted again, and
// `events verify` passes through every server. It logs how long after the
// heal the first write through the healed server was accepted.
//
// Status: the servers start and the majority keeps accepting writes (the
// first one 20-40 ms after the cut in the last two runs). Writes through
// the cut-off server are refused: the first after 7.0 s with 500
// InternalError "etcdserver: request timed out", the second after the
// apiserver's request timeout (60 s, kube-apiserver's --request-timeout)
// with 504 Timeout "request did not complete within requested timeout -
// context deadline exceeded". The healed server accepted a write 12.7 s
// and 20.6 s after the heal. The test still fails, in both runs, for two
// other reasons, and so runs only with CAIRN_HA_TESTS=1:
//
//   - the first refused write is there after the heal. etcd's "request
//     timed out" does not say that the write failed, only that the
//     member gave up waiting for it: the write was committed after all
//     (in both runs), once the member was back. "None of the refused writes is there" holds only
//     for writes etcd never took; for a timeout (etcd's, or the
//     apiserver's 504) either outcome is allowed, as a Kubernetes client
//     must assume.
//   - `events verify` right after the heal got NATS's 503 "JetStream
//     system temporarily unavailable" through one server (s1 in one run,
//     s3 in the other; s1's publisher had a publish unacknowledged for
//     10 s): the verify has to wait until JetStream is back.
//
// The tests need root (network namespaces) and are skipped with -short.
package partitiontest
