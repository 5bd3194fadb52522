// Package servicealloc allocates the cluster IPs and node ports of
// Services the way kube-apiserver does, with one difference in where the
// allocation lives: not a bitmap snapshot updated beside the Service, but
// one etcd key per allocated value, created in the Service's own
// transaction (storage.Extra):
//
//	/cairn/alloc/serviceips/<ip>        a cluster IP
//	/cairn/alloc/nodeports/<port>       a node port (of any protocol, as kube's
//	                                    port allocator counts them)
//
// Each key is claimed with a CreateRevision == 0 compare, so of two
// apiservers handing out the same value at once one transaction fails,
// and its Service is not written either; it then tries another value, or
// answers 422 when the client asked for that value. A Service's delete,
// and an update that gives a value up (a type change), release the keys in
// their own transactions.
//
// # Ranges
//
// IPRange is an IPv4 service CIDR (--service-cluster-ip-range, default
// 10.96.0.0/12) without its network and broadcast addresses; its first
// address, 10.96.0.1, is the kubernetes Service's. As kube (KEP-3070),
// the lower part of the range (min(max(16, size/16), 256) addresses) is
// kept for requested addresses: a random allocation takes it only when
// the upper part is full. PortRange is --service-node-port-range (default
// 30000-32767).
//
// # Errors
//
// A requested value outside its range or already taken is a field error
// with kube's message ("provided port is already allocated", "failed to
// allocate IP 10.96.0.10: provided IP is already allocated"); the caller
// answers 422. An exhausted range is ErrFull, which the caller answers as
// kube does: 500 "failed to allocate a serviceIP: range is full".
//
// # Repair
//
// Repair reads the Services and the allocation keys at one revision and
// makes them agree, as kube's repair controllers do: a key no Service holds
// is deleted (its compare on the key's revision makes that safe against a
// concurrent claim), and a value a Service holds without a key gets its
// key back, or is reported when another Service holds it. It is
// idempotent, so every apiserver runs it (RunRepair) without an election.
package servicealloc
