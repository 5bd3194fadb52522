// Package proxy is cairn's kube-proxy: it programs a node's nftables from
// Services and EndpointSlices, as kube-proxy's nftables mode (KEP-3866,
// kube's pkg/proxy/nftables) does, through sigs.k8s.io/knftables, the
// library kube-proxy uses.
//
// # The table
//
// Everything lives in one table, ip cairn-proxy, laid out as kube-proxy's
// kube-proxy table:
//
//   - Base chains: nat-prerouting and nat-output (dstnat) jump to services;
//     nat-postrouting (srcnat) jumps to masquerading; filter-input,
//     filter-forward and filter-output (dstnat - 10, before any DNAT) send
//     new connections through service-endpoints-check (and, for input,
//     nodeport-endpoints-check).
//   - services: "ip daddr . meta l4proto . th dport vmap @service-ips" and,
//     for local addresses other than 127.0.0.0/8, "meta l4proto . th dport
//     vmap @service-nodeports".
//   - Per Service port (names are kube's: service-HASH-ns/name/proto/port,
//     HASH 8 base32 characters of its SHA-256): a service- chain that marks
//     for masquerade traffic from outside ClusterCIDR and picks an endpoint
//     with "numgen random mod N vmap { 0 : goto endpoint-..., ... }", equal
//     probability for each; one endpoint- chain per endpoint that marks
//     hairpin traffic (a pod reaching itself) and DNATs; for NodePorts an
//     external- chain that marks and goes to the service- chain.
//   - Session affinity ClientIP: a dynamic set affinity-... per endpoint
//     with the Service's timeout; the endpoint chain adds the client's
//     address to its set, and the service chain sends a client found in an
//     endpoint's set to that endpoint before balancing.
//   - A port without usable endpoints has no chains: its ClusterIP (and
//     NodePort) is an element of no-endpoint-services (no-endpoint-nodeports)
//     whose verdict is "goto reject-chain", so a connection is refused.
//     Unlike kube's bare reject, TCP is refused with a reset: the ICMP error
//     of a reject in the output hook never reaches a client on the node
//     itself (TestTraffic saw it wait for its timeout).
//   - mark-for-masquerade sets mark 0x4000 (kube's --masquerade-bit 14);
//     masquerading clears it and masquerades fully-random.
//
// Endpoints are chosen as kube-proxy does: the ready ones (an unset
// condition counts as ready), or, when none is, the serving and terminating
// ones; IPv4 slices only, matched to the Service port by name and protocol,
// duplicates across slices counted once.
//
// # Updates
//
// A Proxier is told of Services and slices (SetService, SetEndpointSlice,
// Delete...) and marks their Service dirty. Sync computes the rules of the
// dirty Services only, compares them with what it programmed last, and
// writes one transaction: map elements deleted or added where their verdict
// changed, changed chains added, flushed and rewritten (endpoint chains
// first), chains no longer wanted flushed and then deleted. An unchanged
// Service is not in the transaction, so a sync's cost follows the change,
// not the number of Services. The first Sync, and the one after a failure
// or Resync, is full: it writes the fixed objects, empties the maps, writes
// every Service, and deletes chains and sets of the table nobody wants; so a
// restarted proxy takes over its predecessor's table in one atomic step,
// with no moment where traffic is unproxied.
//
// # Following the log
//
// NewProxy registers on a consumer.Manager the caches of Services and
// EndpointSlices (shared with any other consumer of the process) and a
// Proxy whose Run waits for both, programs the table in full, then syncs
// after each change, at most once per MinSyncPeriod; a failed Sync is
// retried in full after RetryPeriod (TestProxyFollowsTheLog).
//
// # Cost
//
// TestSyncCost (CAIRN_PROXY_COST=1000,10000, real nft 1.0.6 in its own
// network namespace, on the shared 2-core machine) measured: 1,000
// Services x 10 endpoints programmed in 1.3s, one slice change p50 46ms /
// p99 92ms, a full rewrite 3.4s; 10,000 Services: 2m17s, p50 791ms / p99
// 2.8s, full rewrite 4m58s. The transaction of a change is the same size
// at any N, but its cost still grows with the table: nft 1.0.6 fetches a
// cache of the table before it applies a transaction. By hand, in a table
// of 20,000 chains, one "add element" took 60ms and one "add rule" 82ms,
// against 13ms for an "add chain" alone: the cost is nft's, per command
// kind, not the transaction's size. Open: a newer nft (finer caching),
// libnftables, or the netlink interface, measured against this.
//
// # Not yet done
//
//   - Wiring: a Proxy in the kubelet's process (cairn up, cairn kubelet)
//     and a `cairn proxy` command, in the node's network namespace, reading
//     only Services and EndpointSlices (a subject filter); metrics (sync
//     latency histogram, rules programmed).
//   - Traffic tests from a pod (the forward hook) and NodePort traffic;
//     TestTraffic covers a client in the namespace itself (output hook).
//   - IPv6 (an ip6 table), LoadBalancer and externalIPs, externalTraffic-
//     and internalTrafficPolicy Local, kube's firewall and cluster-ips
//     checks, the nodeport-ips set for --nodeport-addresses, a change of an
//     affinity timeout on a live set (the set is kept as first created).
//   - go tool task bench:proxy around TestSyncCost, and the incremental
//     cost that still grows with the table (above).
package proxy
