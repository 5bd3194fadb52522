// Package shard splits the keys of a consumer between the live replicas of
// a service, active-active, so that every key is handled by exactly one
// replica at a time and the keys of a dead replica move to the others within
// seconds.
//
// # Partitions and leases
//
// Keys ("namespace/name") hash (FNV-32a) into a fixed number of partitions
// (Config.Partitions, 32 by default). Ownership of a partition is a lease:
// a key "p.<n>" in a NATS JetStream key-value bucket whose TTL is the lease
// duration (Config.LeaseTTL, 15 s). A replica acquires a partition with
// Create (which fails while another replica's lease is alive), renews it
// every Config.RetryPeriod (2 s) with Update at the revision it last wrote
// (compare-and-swap, which also restarts the TTL), and releases it with a
// Delete at that revision (or, if a renewal in flight moved it on, at the
// revision it has while it is still in the replica's name). A replica that
// dies stops renewing; the bucket expires its leases after LeaseTTL and
// another replica creates them on its next round; a replica takes a lease
// held in its own Identity at once (a restarted process of it; identities
// are unique among live replicas, and cairn up keeps its server's across
// restarts). The timings are kube's leader election's (15 s lease, 10 s
// renew deadline, 2 s retry period): a saturated machine slows renewals
// down by seconds, and a lease must outlive that rather than move. The
// renewals run on a goroutine of their own, all leases at once, on a NATS
// connection of their own, so that neither the sharder's other work nor
// the consumer's bulk traffic delays them. Counters of acquired, released
// and lost partitions go to Config.Registerer.
//
// # Who should own what
//
// Replicas announce themselves with a member key "m.<identity>" renewed on
// the same schedule. Each replica computes, from the live members, the
// partitions it should hold by rendezvous hashing (highest FNV hash of
// member and partition wins), acquires those, and releases those it holds
// that another member should hold, so load spreads out when a replica joins
// and moves back when it leaves.
//
// # Moves between live replicas do not wait for leases to expire
//
// Only a dead replica's partitions wait for its leases to run out. Every
// replica watches the bucket, and a change a round acts on starts one at
// once rather than at the next RetryPeriod: a member that joins (its first
// heartbeat) makes the holders of its partitions release them as soon as
// their running reconciles are over; a lease deleted makes the member that
// should hold it create it. A replica that stops (Run's ctx done) deletes
// its member key and then every lease, as kube's leader election with
// ReleaseOnCancel, so the others take its partitions over within a round
// trip and their catch-up, not LeaseTTL.
//
// # Never acting on a key it does not own
//
// Owns(key) is true only while the replica holds the key's partition, the
// lease is younger than LeaseTTL minus Config.Margin (5 s) since its last
// successful renewal, and the partition is ready: after acquiring a
// partition the replica first runs Config.CatchUp (a consumer waits there
// until its caches have read the log up to the moment of acquisition, so it
// sees everything the previous owner wrote) and only then calls
// Config.OnAcquire (a consumer queues every key of the partition: reconcile
// is level-triggered). Before releasing a partition the replica stops
// answering Owns for it and waits until no reconcile of its keys is running
// (Guard), so two replicas never reconcile one key at the same time. If
// renewal fails, Owns turns false Margin before the lease can expire on the
// server; a reconcile that is still running then must finish within Margin.
// This relies on clocks of the replicas and the NATS server advancing at
// the same rate, not on them agreeing.
//
// # What scaling out buys
//
// Sharding splits the reconciles, not the consumption: every replica's
// caches still read and decode every event of the kinds they hold (a
// ReplicaSet replica caches every pod, whoever owns its ReplicaSet), since
// a partition can move to it at any time and the log's subjects do not
// carry the owner a pod belongs to. Replicas therefore add reconcile and
// write capacity on more cores or machines, while each pays the full cost
// of following the log. The controller manager keeps that cost low (one
// cache per resource shared by its controllers, events decoded with
// schemas/codec), yet on one 2-core machine, where the replicas share the
// cores with the control plane, 3 replicas create pods about 5% more
// slowly than 1 on average (bench:controllers), with 13% more CPU per pod.
package shard
