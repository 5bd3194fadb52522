// Package scaleouttest holds the scale-out test of cairn's controllers:
// TestControllerManagerScaleOut runs the real cairn binary as one
// `cairn apiserver` and three `cairn controller-manager` replicas (cm-0,
// cm-1, cm-2) that split the keys with partition leases, against an etcd
// and a NATS server in the test process. The test acts as the kubelet
// (every pod it sees becomes Running and Ready through pods/status) and as
// the user: it creates 50 Deployments, then scales some and changes the
// image of others in waves, SIGKILLs cm-1 in the middle, and later restarts
// cm-2 (SIGINT, then a new process). It then checks invariants rather than
// "it came back":
//
//   - every Deployment converges within 90 s of the last change:
//     observedGeneration == generation and replicas, updatedReplicas,
//     readyReplicas and availableReplicas all equal spec.replicas, with
//     exactly one ReplicaSet scaled above zero;
//
// and, replaying the log (the CAIRN stream, read in order from the start)
// with the specs in force at each revision:
//
//   - no pod is created twice for one slot: after a pod create its
//     ReplicaSet has no more live (not deleted, not terminating) pods than
//     its spec.replicas, and each ReplicaSet's creates add up to at most the
//     sum of the increases of its spec.replicas (nobody else deletes pods);
//   - a Deployment never wants more than spec.replicas + maxSurge pods:
//     scaling a ReplicaSet up keeps the sum of its ReplicaSets'
//     spec.replicas within the bound, and after a pod create the live pods
//     its ReplicaSets still want (per ReplicaSet, at most its spec.replicas)
//     stay within it;
//   - every pod create is made by system:kube-controller-manager and names
//     the event it reacted to (a causationID).
//
// Meanwhile, in namespace batch, 6 Jobs (half of them Indexed) of 10
// completions and parallelism 3 run on a second stand-in kubelet that
// also ends each Ready pod Succeeded, and a CronJob fires every minute
// (jobs_test.go). Every Job completes and the CronJob fires within 90 s of
// the last change, and on the log: no Job ever has more active pods than
// its parallelism, exactly completions pods succeed (each index once) and
// status.succeeded counts them, every Job pod create has a cause, and no
// scheduled time of the CronJob has more than one Job. A replica that
// takes partitions over lists its pods again; a Job pod made because of a
// change that list found (not the tail) names that change's event as its
// cause (events/consumer's gap.go): work from a snapshot is no excuse for
// a missing cause here.
//
// A create may be decided from a ReplicaSet a little older than the
// create (kube's slow-start batches go on after a scale-down), so each
// create is held to the largest bound in force from the revision of the
// event it reacted to on. Raw live pods of a Deployment can exceed
// spec.replicas + maxSurge for a moment in kube as here (the deployment
// controller bounds the ReplicaSets' spec.replicas, and an old ReplicaSet's
// pods go a little after its spec went down): the test logs how often.
//
// The package has no code besides its tests. The test is skipped with
// -short; it takes one to two minutes (plus building cairn): the
// CronJob's first minute may be a minute away.
package scaleouttest
