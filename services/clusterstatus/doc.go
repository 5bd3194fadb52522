// Package clusterstatus gathers what `cairn cluster status` prints about
// the servers of a cluster, from etcd and JetStream alone: the etcd
// members (name, peer and client URLs, started or not, learner, leader),
// each stream with its leader and replicas (current, lag), the NATS servers
// that carry them, the elected log publisher and how far the log is behind
// etcd, and which replica owns each partition of the sharded consumers
// (controller-manager, scheduler).
//
// The JetStream meta leader is not among them: only the system account
// can ask for it, and cairn's clients are in the global account.
package clusterstatus
