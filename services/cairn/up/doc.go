// Package up runs a whole cairn cluster in one process: what `cairn up`
// does.
//
// Run takes an exclusive lock on the data directory, loads (or on first
// start creates) the cluster's PKI under <data>/pki, writes an admin
// kubeconfig to <data>/kubeconfig, and then runs the services under a
// supervisor: started in order, each after the one before it is ready, and
// stopped in reverse order when the context is cancelled.
//
// # Output
//
// What a person reads and what a program greps are kept apart. On its
// output (cairn up's stdout) Run prints, through a Reporter, one plain line
// per component as it becomes ready, then a summary and the line that
// points kubectl at the cluster:
//
//	pki ready (/home/me/cairn/.cairn/pki)
//	kubeconfig written (/home/me/cairn/.cairn/kubeconfig)
//	etcd ready (embedded, /home/me/cairn/.cairn/etcd)
//	nats ready (embedded JetStream, /home/me/cairn/.cairn/nats, nats://127.0.0.1:41489)
//	log ready (streams CAIRN and CAIRN_LEASES, publisher elected on etcd)
//	apiserver ready (127.0.0.1:6443)
//	history ready (https://127.0.0.1:6443/history/: ...)
//	controller-manager ready (replicaset, deployment, ...)
//	scheduler ready (default-scheduler)
//	node ready (vm, kubelet https://127.0.0.1:41475)
//	cairn up: all 4 services ready; log in /home/me/cairn/.cairn/cairn.log
//	export KUBECONFIG=/home/me/cairn/.cairn/kubeconfig
//
// Structured records (log/slog, text) go to the logger Run is given; cairn
// up's comes from OpenLog: <data>/cairn.log at the chosen level, appended
// across restarts, and stderr at warn and above (everything at debug).
//
// Everything lives under the data directory (see Paths), so state survives
// a restart on the same directory.
package up
