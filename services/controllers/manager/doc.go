// Package manager runs cairn's controllers as one service, the
// controller-manager: replicaset, deployment, daemonset, garbage collector,
// namespace, node IPAM, disruption, job, TTL-after-finished, cronjob and
// node lifecycle controllers, each a
// consumer of the log that writes back through the apiserver. They run on
// one events/consumer.Manager (shared caches, clients, recorders, shard);
// Controllers lists them, one line each.
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
// is too), and waits until each of its caches has applied the log up to
// there (consumer.ShardOptions.Marker: the catch-up is the Manager's). Only then does it queue the partition's keys. A dead replica's
// partitions move to the others when their leases expire (6 s by default).
//
// # Pods by partition
//
// Pods are nearly all of the log under a Deployment load, and a replica
// only needs the pods of the ReplicaSets whose keys it owns. Their events
// carry the partition of their controller (events.Partition), which is
// the sharder's partition of the ReplicaSet's key, so each replica's pod
// cache follows only the subject partitions of the sharder partitions it
// leases, plus the pods without a controller (which any ReplicaSet may
// adopt): the consumer.Manager sets them on its Partitioned caches
// (consumer.Cache.SetPartitions) when a
// partition is leased (before its catch-up, which then also waits for the
// new pods' snapshot) and when one is released or lost. A pod that
// changes controller is published on no partition, so the replica it
// leaves sees it go. The server filters: a replica of three receives a
// third of the pod events, instead of all of them.
//
// The consumers that want pods outside those partitions:
//   - the deployment controller, whose ReplicaSets may be in other
//     partitions than the Deployment's key: a Recreate rollout lists the
//     old pods through the apiserver, and looks again a second later while
//     some remain;
//   - the garbage collector: a pod is collected by the replica that owns
//     its controller's key (the one that follows it), and the dependents
//     of an owner being deleted in the foreground or with orphaning are
//     listed through the apiserver (see package gc);
//   - the endpoint controllers, whose Services select pods of any
//     controller: a replica follows, with a cache per namespace, every pod
//     of the namespaces where it reconciles a Service with a selector (see
//     package endpoint). With a Service per Deployment in one namespace,
//     each of three replicas receives every pod event of that namespace
//     (BenchmarkControllers with BENCH_SERVICES=1).
package manager
