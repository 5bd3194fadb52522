// Package controlplane assembles cairn's control plane from its parts: etcd
// (embedded or external), NATS JetStream (embedded or external), the log
// publisher and compactor, the watch hub, and the apiserver. `cairn up` runs
// it; integration tests start it with Start and stop it with Close.
//
// Start order is etcd, NATS, streams, publisher, hub, apiserver; Close stops
// them in reverse and waits for every goroutine it started.
package controlplane
