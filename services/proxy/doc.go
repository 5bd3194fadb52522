// Package proxy is cairn's kube-proxy: it programs a node's nftables from
// Services and EndpointSlices, as kube-proxy's nftables mode (KEP-3866,
// kube's pkg/proxy/nftables) does, through sigs.k8s.io/knftables, the
// library kube-proxy uses.
//
// # The table
//
// Each Service lives in one table, ip cairn-proxy or one of its shards
// (cairn-proxy-1, cairn-proxy-2...: see Shards), and each of those tables
// is laid out as kube-proxy's kube-proxy table:
//
//   - Base chains: nat-prerouting and nat-output (dstnat) jump to services;
//     nat-postrouting (srcnat) jumps to masquerading; filter-input,
//     filter-forward and filter-output (dstnat - 10, before any DNAT) send
//     new connections through service-endpoints-check (and, for input,
//     nodeport-endpoints-check); filter-prerouting and filter-output
//     through firewall-check ("vmap @firewall-ips").
//   - services: "ip daddr . meta l4proto . th dport vmap @service-ips" and,
//     for local addresses other than 127.0.0.0/8, "meta l4proto . th dport
//     vmap @service-nodeports".
//   - Per Service port (names are kube's: service-HASH-ns/name/proto/port,
//     HASH 8 base32 characters of its SHA-256): a service- chain (the
//     Cluster policy's endpoints) and a local- chain (the Local policy's:
//     this node's) that DNAT to an endpoint, equal probability for each,
//     in one rule: "meta l4proto tcp dnat ip to numgen random mod N map {
//     0 : 10.1.0.1 . 8080, ... }", the one the ClusterIP goes to
//     (internalTrafficPolicy) first marking for masquerade traffic from
//     outside ClusterCIDR. kube-proxy has an endpoint- chain per endpoint
//     there, reached through a numgen vmap; cairn folds them into the map,
//     since the kernel's commit costs what the namespace's chains number
//     (Cost). NodePorts, externalIPs and load-balancer ingress IPs (not
//     ipMode Proxy) go to an external- chain: externalTrafficPolicy
//     Cluster marks for masquerade and goes to service-; Local keeps the
//     client's address and goes to local-, after sending pods (from
//     ClusterCIDR) and the node itself ("fib saddr type local",
//     masqueraded) to service-, as kube's short-circuit does. With
//     loadBalancerSourceRanges, the load-balancer IPs are elements of
//     firewall-ips whose firewall- chain drops "ip saddr != { ranges }".
//   - Hairpin (a pod reaching itself through its Service): nat-postrouting
//     marks for masquerade "ct status dnat ip saddr . ip daddr @hairpin",
//     the set holding "ep . ep" for every endpoint address of the table's
//     Services; the Proxier counts each address over the table's Services,
//     so an address two Services share stays until both drop it. Without
//     it the pod would drop the reply, which comes from its own address
//     (TestTrafficHairpin). With several shards, a table whose set lacks
//     the address neither marks nor NATs, and the kernel runs the next
//     table's chain, up to the one whose set holds it (Shards).
//   - Session affinity ClientIP keeps kube's per-endpoint shape, the state
//     being per endpoint: a dynamic set affinity-... per endpoint with the
//     Service's timeout, an endpoint- chain per endpoint that adds the
//     client's address to its set and DNATs ("meta l4proto tcp dnat to
//     10.1.0.1:8080"), and a service chain that sends a client found in an
//     endpoint's set to that endpoint, else balances with "numgen random
//     mod N vmap { 0 : goto endpoint-..., ... }".
//   - A port without usable endpoints has no chains: its ClusterIP (and
//     NodePort, externalIPs...) is an element of no-endpoint-services
//     (no-endpoint-nodeports) whose verdict is "goto reject-chain", so a
//     connection is refused; when only a Local policy has none here
//     (endpoints elsewhere), the verdict is drop, as kube's.
//     Unlike kube's bare reject, TCP is refused with a reset: the ICMP error
//     of a reject in the output hook never reaches a client on the node
//     itself (TestTraffic saw it wait for its timeout).
//   - mark-for-masquerade sets mark 0x4000 (kube's --masquerade-bit 14);
//     masquerading clears it and masquerades fully-random.
//
// Endpoints are chosen as kube-proxy's CategorizeEndpoints does
// (pkg/proxy/topology.go): IPv4 slices only, matched to the Service port
// by name and protocol, duplicates across slices counted once; for each of
// the Cluster and Local policies the ready ones (an unset condition counts
// as ready), or, when none is, the serving and terminating ones; Local
// takes those whose nodeName is Config.NodeName. The Cluster policy keeps
// only the endpoints hinted for the node's zone (hints.forZones, the
// topology.kubernetes.io/zone label of the proxy's Node, which it follows
// alone: consumer.Named) when every ready endpoint has a zone hint and one
// names that zone.
//
// # Health checks
//
// With Options.HealthChecks (RunNode sets it), a Service with
// externalTrafficPolicy Local and a healthCheckNodePort (the apiserver
// allocates one for a LoadBalancer) is served on that port on every
// address of the node's namespace, as kube-proxy's service health server:
// 200 when the node has a ready endpoint of it and the last Sync
// succeeded, else 503, with kube's JSON (service, localEndpoints,
// serviceProxyHealthy). TestTrafficPolicies and TestRunNode fetch it.
//
// # Updates
//
// A Proxier is told of Services and slices (SetService, SetEndpointSlice,
// Delete...) and marks their Service dirty. Sync computes the rules of the
// dirty Services only, compares them with what it programmed last, and
// writes one transaction (nft -f, or with Config.Netlink one netlink batch,
// as a node's proxy does: see Cost): map elements deleted or added where
// their verdict changed, changed chains added, flushed and rewritten
// (affinity's endpoint chains first), chains no longer wanted flushed and
// then deleted, hairpin elements whose count went to or from 0 deleted or
// added. An unchanged Service is not in the transaction, so a sync's
// size follows the change, not the number of Services. The first Sync, and the one after a failure
// or Resync, is full: it writes the fixed objects, empties the maps, writes
// every Service, and deletes chains and sets of the table nobody wants; so a
// restarted proxy takes over each of its predecessor's tables in one
// atomic step (a transaction per shard table, see Shards), with no moment
// where traffic is unproxied.
//
// # Shards
//
// The kernel validates a table on a commit that adds a jump, a goto, a
// NAT expression or a verdict-map element to it: it walks the whole chain
// graph from the table's base chains, so a change of one Service in one
// table of 10,000 cost 233 ms of system time, 10x what it did at 1,000
// (Cost). The Services are therefore spread over shard tables of about
// Config.ShardServices (500) Services each, and a change validates its own
// shard only. Every shard is a complete table as above: its own base
// chains in every hook, at the same priorities, its own maps and fixed
// chains. A packet for a Service matches exactly one shard: the shards'
// service-ips (and nodeport, no-endpoint) maps hold disjoint keys, so in
// every other table the lookups miss and the base chain accepts; once a
// NAT chain has translated a connection the kernel runs no further NAT
// chain of that hook, and the masquerade mark is cleared by the first
// masquerading chain that sees it.
//
// A Service's shard is the jump consistent hash (Lamping and Veach) of its
// namespace/name over the number of shards: independent of the other
// Services, so a restarted proxy finds each where its predecessor put it,
// and one shard more moves only the Services of the new shard, one less
// only those of the last. The number of shards is what keeps them at
// ShardServices on average; it shrinks only once one shard less would be
// under 3/4 full, so Services do not move to and fro around a boundary.
// An incremental Sync that changes it rewrites the Services that move: a
// new shard's table and base objects are written through nft first, then
// one netlink batch deletes the moving Services from their old tables,
// adds them to the new ones and deletes the tables of shards that go. A
// full Sync writes each shard in an nft transaction of its own, from the
// last to the first, and then deletes the proxy's tables beyond them
// (found over netlink, as are the stale chains and sets of each shard):
// a Service that moves is in its new table before its old one drops it.
// One transaction for all shards cost the square of the Services (Cost).
//
// # Following the log
//
// NewProxy registers on a consumer.Manager the caches of Services and
// EndpointSlices (shared with any other consumer of the process) and a
// Proxy whose Run waits for both, programs the table in full, then syncs
// after each change, at most once per MinSyncPeriod; a failed Sync is
// retried in full after RetryPeriod (TestProxyFollowsTheLog). The caches
// read only those two resources' subjects of the log (filtered by the
// server), so the proxy's traffic grows with Services, not with pods.
//
// # On a node
//
// RunNode is a node's proxy: its own Manager with its own credentials
// (user system:kube-proxy, whom the bootstrap policy binds to the
// ClusterRole system:node-proxier: list and watch Services, Endpoints,
// EndpointSlices), nft run inside the node's network namespace (nsNFT:
// every knftables call runs on a thread switched into it, package
// services/netns, so nft is forked there), and the apiserver relay. The
// kubelet runs it next to every real node of cairn up and cairn kubelet
// (kubelet.NodeConfig.Proxy); cairn proxy runs it alone. Hollow nodes run
// none. TestRunNode checks it against a real control plane with real nft
// in a namespace of the test's own; the end-to-end test (services/cairn/
// e2etest, TestServices) from pods on the real node of cairn up.
//
// # The apiserver from a pod
//
// A node's namespace routes nothing off the node, so a pod cannot reach
// the apiserver on the host's loopback. RunNode puts APIServerAddress
// (100.64.0.1, the same on every node) on the namespace's loopback and a
// Relay listens there, on the apiserver's port, copying each connection to
// the apiserver (TLS passes through; the apiserver authenticates the pod,
// as k3s's agent load balancer does). Apiservers advertise that address
// (--advertise-address default), so the lease endpoint reconciler makes it
// the endpoint of default/kubernetes, and the proxy DNATs 10.96.0.1:443 to
// it like any ClusterIP. The serving certificate covers 10.96.0.1, the
// kubernetes.default.svc names and 100.64.0.1 (pki.DefaultHosts). A
// link-local or loopback address would be simpler but Kubernetes refuses
// them as endpoints. The Service range is routed to the namespace's lo
// (from 100.64.0.1): with no default route, a ClusterIP without endpoints
// would otherwise fail routing before the forward hook refuses it.
// TestServices (services/cairn/e2etest) fetches https://10.96.0.1 from a
// pod as client-go's in-cluster config does: KUBERNETES_SERVICE_HOST, the
// pod's service-account token and CA, the certificate checked for
// kubernetes.default.svc; the apiserver names the service account.
//
// # Cost
//
// nft 1.0.6 dumps the whole ruleset (every table: measured by hand, a
// table of 20,000 chains slows an "add rule" in another, tiny table just
// as much) into its cache before it applies a transaction that adds a rule
// or an element: in a table of 20,000 chains one "add element" took 60ms
// and one "add rule" 82ms, against 13ms for an "add chain" alone. That is
// what made a change cost 46ms at 1,000 Services and 791ms at 10,000
// (TestSyncCost through nft). kube-proxy's nftables mode writes only the
// changed objects too (partial syncs) and lives with nft's cost.
//
// So incremental Syncs do not go through nft: netlinkWriter sends the same
// changed objects as one netlink batch (github.com/google/nftables; the
// kernel applies a batch atomically, as it does nft's transaction), each
// rule translated into the expressions nft generates for it (netlink.go).
// Nothing is read back, so the cost follows the change. TestNetlinkMatchesNFT
// drives every kind of change over netlink and checks that nft lists the
// table exactly as after a full rewrite of the same state through nft;
// TestTrafficNetlink sends connections through rules written that way.
// (nft prints the keys of a netlink-written numgen map byte-swapped:
// google/nftables marks anonymous sets big-endian; the kernel compares them
// right.) Full Syncs, the first and a restart's, stay nft transactions,
// one per shard table: the kernel walks its whole transaction list for
// every anonymous map a rule binds (__nft_set_trans_bind; every Service's
// numgen map is one), so a transaction of all Services costs the square
// of their number: with perf, 92% of a 10,000-Service full Sync in one
// transaction was that function (program all 5m12s). One transaction per
// shard of 500 cut it to 48 s (1,000 Services: 3.8 to 2.0 s).
//
// TestSyncCost (go tool task bench:proxy; CAIRN_PROXY_COST=1000,10000,
// real nft 1.0.6 and kernel 6.18 in a namespace of its own, the shared
// 2-core machine at a load of 15-25) measured, per change of one
// EndpointSlice (one endpoint of 10 going unready, 50 Services):
//
//	Services  netlink p50/p99   nft p50/p99      program all  full rewrite
//	1,000     94 / 294 ms       258 / 748 ms     4.7 s        9.1 s
//	10,000    328 / 778 ms      2.30 / 6.49 s    2m52s        6m12s
//
// Over netlink a change costs 3.5x more at 10x the Services, through nft
// 9x, and at 10,000 Services netlink is 7x faster. What still grows is the
// kernel's: a batch that adds a rule or map element with a verdict (jump,
// goto; a NAT expression too) marks the table for validation, and the
// commit walks the table's whole chain graph from its base chains. By hand
// (netlink, a table of 10,000 service and 10,000 endpoint chains): a chain
// alone or a rule with only a counter 0.4-2 ms, a rule with a jump 24-81
// ms, a verdict-map element 11-214 ms; in a tiny table all of them ~0.1
// ms. Hence the shards (above): the kernel (6.18 here) keeps the
// validation state per table, so a commit validates only the tables it
// touched. TestSyncCost (CAIRN_PROXY_COST=1000,10000 CAIRN_PROXY_COST_NFT=0,
// the same binary and run for both layouts, the shared machine at a load
// of 60-90) measured, per change of one EndpointSlice over netlink:
//
//	Services  layout               p50 / p99          system time  program all
//	1,000     one table            104 / 323 ms       18.3 ms      13.6 s
//	1,000     shards (2 tables)    114 / 204 ms       10.1 ms      14.3 s
//	10,000    one table            728 ms / 2.46 s    236 ms       8m54s
//	10,000    shards (20 tables)   102 / 273 ms       28.8 ms      4m29s
//
// At 10x the Services a change's p50 was 7.0x in one table and 0.90x in
// shards; the kernel time per change still grew 2.9x (10 to 29 ms), less
// than the wall time's noise at that load. At a lower load (15-25, and
// 4-24 for the second run, with the traffic-policy rules and the firewall
// base chains), the same test measured:
//
//	Services  layout               p50 / p99 (run 1)   run 2             system time
//	1,000     one table            23.5 / 59.6 ms      22.6 / 159 ms     13.6 / 19.2 ms
//	1,000     shards (2 tables)    8.9 / 39.5 ms       12.5 / 21.7 ms    6.3 / 9.8 ms
//	10,000    one table            305 / 537 ms        318 / 935 ms      233 / 238 ms
//	10,000    shards (20 tables)   80.1 / 243 ms       66.0 / 189 ms     30.2 / 29.2 ms
//
// so with the machine quieter a change's p50 at 10x the Services is 13-14x
// in one table and 5.3-9.0x in shards: the shards cut it 4-5x at 10,000
// Services but it is not flat. The kernel's share grows 3-5x (6-10 to 29
// ms); the rest of the growth (3 to 37-50 ms outside system time) is
// mostly waiting for a CPU at that load. Through nft (run 1) a change cost
// 240 ms at 1,000 and 28.2 s at 10,000 Services (nft dumps all 20
// tables), 350x the netlink p50.
//
// What grew in the kernel was found with perf (perf record -g on the test
// process during the 50 changes, CAIRN_PROXY_COST_LAYOUT=shards): at 1,000
// Services the commit's time was mostly table validation
// (nft_chain_validate, nft_setelem_validate), nf_tables_commit's own time
// a seventh of it; at 10,000 Services nf_tables_commit's own time was 55%
// of the samples, against 21% for nft_chain_validate. That is the
// commit's step 2, which visits every chain of every table in the
// namespace (nf_tables_commit_chain on each) whatever the batch touched:
// it grows with the number of chains, then about 11 per Service of 10
// endpoints (the service chain and one per endpoint, as in kube-proxy's
// nftables mode), so 110,000 at 10,000 Services. Same run, same binary
// (load 8-10), per change over netlink, before the fold (below):
//
//	Services  p50 / p99         system time  program all (a transaction per shard)
//	1,000     24.0 / 32.9 ms    13.5 ms      2.0 s
//	10,000    60.7 / 156 ms     29.4 ms      48.0 s
//
// (2.5x the p50 and 2.2x the kernel time at 10x the Services). Hence the
// fold (The table): a Service without session affinity has one chain per
// policy it uses (service-; local-, external-, firewall- where its
// traffic policies, NodePort or source ranges want them) and none per
// endpoint, its endpoints being elements of the dnat rule's anonymous map
// and of the table's hairpin set; 10,000 such Services make about 10,000
// chains, not 110,000, and the chain graph a commit validates holds one
// chain a Service, not 11. A change rewrites one chain and adds or
// deletes a hairpin element, where it rewrote the service chain's vmap of
// endpoint chains and flushed and deleted one of them. TestSyncCost
// (CAIRN_PROXY_COST=1000,10000 CAIRN_PROXY_COST_NFT=0
// CAIRN_PROXY_COST_LAYOUT=shards), a build of the commit before the fold
// and one after it run one after the other, three times, the shared
// 2-core machine at a load of 10-18, per change of one EndpointSlice over
// netlink:
//
//	Services  rules            p50 / p99: run 1   run 2            run 3            system time: 1 / 2 / 3   program all
//	1,000     endpoint chains  11.4 / 124 ms      5.09 / 110 ms    5.42 / 124 ms    8.92 / 5.66 / 4.91 ms    7.5 / 7.0 / 7.3 s
//	1,000     folded           1.27 / 97.7 ms     2.37 / 29.3 ms   1.44 / 13.1 ms   0.66 / 1.66 / 1.01 ms    3.4 / 3.4 / 1.0 s
//	10,000    endpoint chains  55.4 / 177 ms      34.2 / 213 ms    21.2 / 75.1 ms   18.1 / 20.7 / 18.7 ms    87 / 91 / 70 s
//	10,000    folded           1.86 / 40.9 ms     3.32 / 14.3 ms   2.90 / 12.9 ms   1.32 / 1.96 / 1.70 ms    35 / 31 / 11 s
//
// Folded, a change's p50 is 1.3-3.3 ms, 2-9x less than with endpoint
// chains at 1,000 Services and 7-30x less at 10,000, and programming all
// takes 2-7x less. At 10x the Services the p50 is 1.4-2.0x (3.9-6.7x with
// endpoint chains) and the system time 1.2-2.0x (2.0-3.8x). It is not
// quite flat, presumably because the commit still visits every chain of
// the namespace, now about one a Service (not profiled again: perf on the
// test process caught too few samples of the 50 changes to tell); at
// 10,000 Services a change's system time is 1.3-2.0 ms. The p99s are the
// loaded machine's (a Sync that waited for a CPU), not the change's.
// Session affinity ClientIP keeps an endpoint chain per endpoint (its
// sets are per endpoint), so a node whose Services all use it has the
// cost of the table before the fold.
//
// BenchmarkProxy measured the whole path, 1,000 Services x 10 endpoints
// written through a real apiserver, a node's proxy in a namespace: all
// programmed 2.9 s after the proxy started; an EndpointSlice update sent
// to the apiserver to the changed rule live in the kernel (read back over
// netlink) p50 63 ms, p99 155 ms; a full rewrite (a restarted proxy taking
// the table over) 6.8 s, 107x a change's p50. Later runs: 4.29 s, p50/p99
// 8.4/55 ms, rewrite 3.23 s (387x), load 15-20; with the traffic-policy
// rules 3.25 s, 13.7/41.8 ms, rewrite 6.60 s (482x), load 4-11. With a
// transaction per shard table in a full Sync: 1.87 s, 26.4/37.9 ms,
// rewrite 2.04 s (77x), load ~3. With the endpoint chains folded, a build
// before and one after run one after the other (load 10-13): 1.31 s,
// 4.40/29.0 ms, rewrite 3.38 s (768x), against 3.97 s, 10.7/44.0 ms,
// rewrite 3.23 s (301x) before: a restarted proxy's rewrite, written
// through nft, did not get cheaper in that one run.
//
// # Not yet done
//
//   - IPv6 (an ip6 table), kube's cluster-ips check, the nodeport-ips set
//     for --nodeport-addresses, node hints (PreferSameNode), the
//     firewall's exception for traffic from the node itself (kube adds the
//     load-balancer IPs when a range holds its node IP: the proxy has no
//     node IP), a change of an affinity timeout on a live set (the set is
//     kept as first created), conntrack cleanup of stale UDP flows.
//   - The relay listens on the port of the one apiserver in the proxy's
//     kubeconfig; apiservers on other ports (one per port in the kubernetes
//     Service) are not relayed, and the relay does not fail over.
package proxy
