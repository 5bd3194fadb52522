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
// A write refused with a timeout (etcd's "request timed out", the
// apiserver's 504) has an unknown outcome, as for any Kubernetes client:
// the cut-off member may hand it to the leader once healed. The test
// allows either, but every server must tell the same; and `events verify`
// runs through every server until it passes (JetStream may answer 503
// "temporarily unavailable" right after the heal), for up to two minutes.
//
// Status: it passes (110 s, load ~10): the majority's first write 10 ms
// after the cut; through the cut-off server the first write refused after
// 7.0 s with 500 "etcdserver: request timed out" (committed after the
// heal after all), the second after the apiserver's request timeout (60
// s, kube-apiserver's --request-timeout) with 504 Timeout (never
// committed); the healed server's first write accepted 17.6 s after the
// heal; verify ok through all three (69 events). A second run (102 s,
// load ~1): the same refusals and outcomes, the healed server's first
// write 16.0 s after the heal. Two more runs (2026-12-03, 99.7 s and 106
// s, one of them next to another three-server test) passed: four in a row, so it runs
// in go tool task test.
//
// The tests need root (network namespaces) and are skipped with -short.
package partitiontest
