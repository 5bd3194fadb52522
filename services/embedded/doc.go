// Package embedded runs the two servers cairn keeps its state in, inside the
// cairn process: an etcd member (go.etcd.io/etcd/server/v3/embed) and a NATS
// server with JetStream on a file store (nats-server/v2/server).
//
// Both live under one data directory and listen on loopback only. Neither
// takes signals (NATS NoSigs); the binary owns signal handling and stops them
// by cancelling the context given to Run. The state survives a restart on the
// same data directory.
//
// Package embeddedtest starts the same servers for tests, one pair per test,
// cleaned up with t.Cleanup.
package embedded
