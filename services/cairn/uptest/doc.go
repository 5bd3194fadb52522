// Package uptest measures the whole control plane as users run it
// (go tool task bench:up): `cairn up --node=false`, with all of its
// consumers (controllers, scheduler, the log's publisher, watch hub and
// history projection), as a process of its own, on an etcd that is a
// process of its own, driven by load clients in separate processes.
//
// BenchmarkUp first measures the raw etcd put rate of the same machine in
// the same run: as many writers as there will be clients, in the same
// number of processes, putting values the size of a stored pod into that
// etcd. Then it starts `cairn up` on it and creates BENCH_UP_PODS pods
// (20,000) through BENCH_UP_PROCS load processes (8) of BENCH_UP_CLIENTS
// client-go clients in all (64), each client on a connection of its own,
// once per content type in BENCH_UP_CODECS (protobuf,json). It reports
// creates/s, p50/p99, the ratio to the raw put rate, the CPU per create of
// every process (cairn up, etcd, the load clients), their peak RSS, and
// the pipeline's own churn from cairn up's /metrics: publisher elections
// and terms lost, partitions acquired, released and lost, catch-up
// failures and the publish lag p99.
//
// With BENCH_UP_PROFILE=DIR it also writes DIR/CODEC.pprof, a 30 s CPU
// profile of cairn up from its /debug/pprof/profile (kube-apiserver's
// --profiling, on by default) taken while the creates run.
//
// BENCH_UP_FLAGS adds flags to cairn up (e.g.
// --enable-priority-and-fairness=false, to measure without it).
//
// The load processes and the etcd are this test binary run again with
// CAIRN_UPBENCH_ROLE set (main_test.go).
package uptest
