// Package manager runs cairn's controllers as one service, the
// controller-manager: replicaset, deployment, garbage collector and
// namespace controllers, each a consumer of the log that writes back
// through the apiserver.
//
// # Scale-out
//
// Any number of controller-managers run active-active. Keys are split by
// package events/consumer/shard: the key space of every controller is cut
// into partitions whose leases live in a NATS key-value bucket, and a
// replica acts only on keys of partitions it holds. When a replica takes
// over a partition it first catches up: it writes its marker Lease
// (kube-system/cairn-controller-manager-<identity>) through the apiserver,
// waits until that write is on the log (so everything committed before it
// is too), and waits until each controller's caches have applied the log up
// to there. Only then does it queue the partition's keys. A dead replica's
// partitions move to the others when their leases expire (6 s by default).
package manager
