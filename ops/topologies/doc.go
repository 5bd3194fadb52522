// Package topologies puts test hosts on one machine: each host is a
// network namespace with its own address on a bridge that lives in a
// network namespace of its own, so a test can run a server per host, cut a
// host off from the others (its bridge port goes down, its processes keep
// running) and heal it, and SIGKILL what runs there. Nothing inside is
// routed to the machine's network.
//
// The work is done by hosts.sh, next to this file and embedded in the
// package, which users run by hand the same way (go tool task up:ha):
//
//	ops/topologies/hosts.sh create ha s1 s2 s3   # namespaces ha-br, ha-s1, ...; 10.77.0.1-3
//	ops/topologies/hosts.sh exec ha s1 CMD...    # run CMD on s1
//	ops/topologies/hosts.sh cut ha s2            # s2 is cut off
//	ops/topologies/hosts.sh heal ha s2
//	ops/topologies/hosts.sh destroy ha
//
// New does the same for a test, with a name of its own and the namespaces
// deleted at the test's cleanup. It needs root and iproute2.
package topologies
