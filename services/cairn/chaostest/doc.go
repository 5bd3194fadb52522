// Package chaostest holds the chaos test of servers joined into one
// cluster (issue 20). TestChaos runs, each on its own test host (a network
// namespace with its own address on a bridge the test creates, package
// ops/topologies), three servers, `cairn up --node=false --cluster-init`
// on s1 and `cairn up --join https://s1 --join-token T` on s2 and s3, and
// two hollow nodes, `cairn agent --join --runtime hollow` with a token of
// `cairn token create` on n1 and n2, and a real node on r1, `cairn agent
// --join --runtime cri` (its own containerd and runc, the pods' network
// namespace cairn-chaos-r1 of its own; the agent enters only r1's network
// namespace, so its mounts stay where the cleanup finds them). A controller-manager replica of its
// own, `cairn controller-manager --identity chaos-cm`, runs on s3's host
// next to the three in the servers' processes, so that a controller-manager
// can be SIGKILLed without its server. The test reads the cluster as users
// do: `cairn cluster status` (etcd leader, JetStream meta leader,
// publisher, log revision, partition owners), `cairn events verify` and
// `cairn events tail`, each run inside a server's host.
//
// # What it does
//
// 51 Deployments (2 replicas, maxSurge 1, maxUnavailable 0; roll-00 to
// roll-49 on the hollow nodes, roll-50 on the real node, by nodeSelector)
// and a CronJob
// (`* * * * *`, concurrencyPolicy Forbid, Jobs ended by
// activeDeadlineSeconds 20 s, hollow containers running until stopped) are
// created; then a writer patches the Deployments' pod template one after
// another through client-go (every 400 ms, each patch a new rollout),
// moving to the next server after a failed write, while these faults come
// one at a time, each after the cluster has recovered from the one before
// (three etcd members answering, a publisher and a meta leader elected, a
// restarted server's every service ready):
//
//  1. the server holding the log's publisher is SIGKILLed, and restarted
//     on its data directory once the heal is measured;
//  2. the etcd leader's server is SIGKILLed and restarted the same way;
//  3. the JetStream meta leader's host is cut off from the others for 20 s
//     (its bridge port down) and healed; `cairn events verify` then runs
//     through every server until it passes (JetStream answers 503 for a
//     while after the heal), for up to two minutes each;
//  4. the controller-manager chaos-cm is SIGKILLed and restarted.
//
// For each it measures, from the fault: writes accepted again (a
// ConfigMap created through another server), the first event published
// after it (the log's revision in cluster status reaching that write) and,
// for 1, 2 and 4, the partitions moved (no shard partition left to the
// dead identity).
//
// # Invariants, checked afterwards
//
//   - Every acknowledged write (the creates, every acked patch, the
//     ConfigMaps) is in etcd, read through every server, with the UID the
//     write returned and the Deployment's template at the acked revision or
//     a later one, and on the log at the resourceVersion the write
//     returned.
//   - `cairn events verify` passes through every server.
//   - Every Deployment rolls out its last template (the controllers work
//     again after all faults), the real node's too: its kubelet, joined
//     through s3, failed over between the servers and ran the rollouts'
//     pods (at least two pods reached Running on it, on the log); SIGINT
//     then stops its pods and containerd.
//   - Replaying the log (`cairn events tail --json`): no pod is created for
//     a ReplicaSet that already has spec.replicas non-terminated pods (no
//     pod created twice), and a Deployment's ReplicaSets never have more
//     than replicas + maxSurge spec.replicas in all (kube's surge bound).
//     The revisions at which a Deployment had more than replicas +
//     maxSurge non-terminated pods are counted and logged, not checked:
//     kube keeps the bound on the specs, and a ReplicaSet's status lags
//     its pods (below).
//   - The CronJob's Jobs (named by their scheduled time) are each created
//     once, never two running at once, and it fired at least twice.
//
// # Bugs it found
//
// The spec bound failed in two of the first four runs that checked it: at
// revision 5577, two revisions after a template patch, roll-04's
// ReplicaSets had spec.replicas 4 in all (the previous template's at 2,
// the one before at 1, the new one created at 1). The deployment
// controller had counted the previous template's ReplicaSet at 1: its
// replica set cache, following the log on its own, had not yet applied
// the controller's own scale-up of it to 2, while its deployment cache
// had the new template. It came right after a takeover (the etcd leader's
// server killed and roll-04's keys moved), when the caches catch up
// unevenly. Fixed: a deployment round waits until the replica set cache
// shows this replica's own last write to the deployment's ReplicaSets
// (package deployment, TestStaleReplicaSetCache reproduces it by holding
// the cache), and the spec bound is checked in every run.
//
// More pods than replicas + maxSurge: in every run Deployments reach
// replicas + maxSurge + 1 non-terminated pods (4 for 2 + 1; at 23, 73,
// 51, 30, 45 and 77 revisions in six runs), while the no-double-create
// check holds. The log shows why: a ReplicaSet's status.replicas lags its
// own pod creates (the ReplicaSet controller writes status from its pod
// cache, which has not yet seen the pod it just created: roll-01-b498b4c7f
// created pod 85sqk at revision 4490 and wrote status.replicas 1 for its 2
// pods at 4536); a new rollout then scales that ReplicaSet down (spec 1)
// and counts it as max(spec 1, status 1) = 1 pod while it has 2, and
// scales the new ReplicaSet up: 1 + 2 + 1 = 4 pods. Kube behaves the same
// (it counts the specs; maxSurge bounds the ReplicaSets' sizes), so this
// is counted and logged, not failed.
//
// A server restarted while JetStream is unavailable could exit: in one run
// the etcd leader's server, restarted, was still syncing its
// controller-manager when the meta leader's host was cut off, and `cairn
// up` exited 1 with "controller-manager: consumer: wait for log: context
// deadline exceeded" (a JetStream API request timing out during the
// controller-manager's WaitForSync failed the service, and with it the
// server). Fixed: Cache.WaitForLog now retries the log's end until its
// context ends (package consumer, TestWaitForLogRetries). The test still
// waits until a restarted server's every service is ready before the next
// fault, so that each fault is measured alone.
//
// A restarted server rewrote its kubeconfig in place (truncate, then
// write), and in one run inside a whole go tool task test the test's
// client read it empty between the two ("invalid configuration: no
// configuration has been provided"). Fixed: kubeconfigs are written
// through a temporary file and a rename (package atomicfile;
// kubeconfig.TestRewriteNeverEmpty fails with the in-place write). The
// test repeats its failure messages after the processes' output
// (cairntest.RecordFailures): a CI summary shows the end of the log.
//
// # Figures
//
// Run on 2 cores shared with other builds and tests, each run's heal
// times from the fault (w: writes accepted again through another server;
// log: the first event published after the fault; p: partitions moved
// off the dead replica):
//
//	run (load)   publisher killed        etcd leader killed      meta leader cut  healed host      cm      took
//	A (7-15)     w 7.35 log 20.0 p 15.6  w 1.09 log 12.3 p 16.2  w 1.22 log 27.6  w 2.34 log 16.9  p 16.1  5m42s
//	B (~10)      w 1.20 log 21.8 p 17.3  w 1.35 log 19.9 p 15.9  w 7.82 log 65.7  w 6.41 log 8.6   p 16.7  6m16s
//	C (17-22)    w 7.32 log 20.2 p 15.6  w 1.49 log 22.6 p 15.2  w 7.84 log 76.5  w 5.57 log 11.1  p 16.8  8m11s
//	D (5-10)     w 1.51 log 21.3 p 17.1  w 7.38 log 18.8 p 15.4  w 7.63 log 86.1  w 5.96 log 9.4   p 13.8  6m13s
//	E (8-12)     w 7.33 log 18.5 p 15.2  w 1.32 log 11.6 p 17.9  w 2.27 log 83.6  w 0.39 log 9.1   p 16.7  5m48s
//	F (9-17)     w 7.31 log 19.7 p 15.4  w 7.39 log 9.7  p 17.1  w 1.87 log 35.0  w 6.14 log 12.7  p 15.8  7m02s
//	G (3-7)      w 7.30 log 20.8 p 14.7  w 0.96 log 10.7 p 15.9  w 1.39 log 28.8  w 22.2 log 26.0  p 13.4  4m58s
//	H (2-5)      w 7.29 log 21.3 p 14.6  w 1.41 log 19.3 p 13.8  w 7.32 log 32.1  w 10.9 log 26.4  p 13.8  4m55s
//
// (seconds; "healed host": through the healed server, from the heal).
// Patches acked / failed: 333/2, 463/4, 575/4, 469/3, 436/2, 455/2, 323/2,
// 396/4; CronJob Jobs 5, 5, 6, 3, 3, 6, 4, 4; `events verify` right after the heal passed through every server
// after 7 to 70 s of retries.
// "-" for the cut: no partition is left to a cut-off replica's identity
// (it comes back), so none is measured.
//
// Partitions move after the dead replica's 15 s shard lease expires
// (package shard). The log stalls longest when the cut-off host holds the
// publisher and the etcd and meta leaders at once (B to E: one server had
// taken all three after the second fault; in A only the meta leader was
// cut off), presumably because the cut-off publisher's election must
// lapse before another server publishes. Runs A and B had every other
// invariant pass and failed only on the pod bound (then checked always);
// C and D passed with the spec bound checked, E failed on it, F (bounds
// logged only) passed with 77 pod-bound and 11 spec-bound violations
// logged; every other invariant passed in all six (go test -run TestChaos
// alone). Run H is the first with the real node (13 pods ran on it; 18
// revisions with 4 pods logged). Runs A to F were before the spec-bound fix; G, after it, passed
// with the spec bound checked (60 revisions with 4 pods logged), and the
// test (before the fix) passed inside a whole go tool task test (fresh
// clone, 6m03s). One more
// run, before the test waited for a restarted server's every service,
// failed on the server exit above. The test takes 6 to 9 minutes on
// this machine: run it with a -timeout above go test's default 10m (go
// tool task test passes 40m).
//
// The test needs root (network namespaces) and is skipped with -short.
package chaostest
