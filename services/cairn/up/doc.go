// Package up runs a whole cairn cluster in one process: what `cairn up`
// does.
//
// Run takes an exclusive lock on the data directory, loads (or on first
// start creates) the cluster's PKI under <data>/pki, writes an admin
// kubeconfig to <data>/kubeconfig, and then runs the services under a
// supervisor: started in order, each after the one before it is ready, and
// stopped in reverse order when the context is cancelled. It prints one
// line per step to its output as the step becomes ready, e.g.
//
//	pki ready (/home/me/cairn/.cairn/pki)
//	kubeconfig written (/home/me/cairn/.cairn/kubeconfig)
//	etcd ready (embedded, data dir /home/me/cairn/.cairn/etcd)
//
// Everything lives under the data directory (see Paths), so state survives
// a restart on the same directory.
package up
