package proxy

import (
	"context"
	"math/bits"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// inNetNSEnv tells the re-executed test binary it runs in the network
// namespace TestRealNFT made for it.
// Its value is the parent's network namespace, which the child must not be in.
const inNetNSEnv = "CAIRN_PROXY_TEST_PARENT_NETNS"

// TestRealNFT programs the table with the real nft, in a network namespace
// of its own (see inOwnNetNS), and reads it back with nft list table.
func TestRealNFT(t *testing.T) { inOwnNetNS(t, "TestRealNFT", realNFT) }

// inOwnNetNS runs child in a fresh network namespace: it re-executes this
// test binary (only the test named) under `unshare --net`, so the host's
// nftables and network are never touched, and nothing is left when the
// test ends (the namespace dies with the process). Skipped without root,
// unshare or nft.
func inOwnNetNS(t *testing.T, name string, child func(t *testing.T)) {
	if parent := os.Getenv(inNetNSEnv); parent != "" {
		self, err := os.Readlink("/proc/self/ns/net")
		if err != nil || self == parent {
			t.Fatalf("refusing to program nftables: not in a network namespace of our own (%s, parent's %s, %v)", self, parent, err)
		}
		child(t)
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root for a network namespace and nftables")
	}
	for _, tool := range []string{"unshare", "nft", "ip"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed (ops/node-deps.sh installs nftables and iproute2): %v", tool, err)
		}
	}
	parent, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), "unshare", "--net", "--", os.Args[0], "-test.run=^"+name+"$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), inNetNSEnv+"="+parent)
	out, err := cmd.CombinedOutput()
	t.Logf("in the namespace:\n%s", out)
	if err != nil {
		t.Fatalf("test in a network namespace: %v", err)
	}
	if !strings.Contains(string(out), "--- PASS: "+name) {
		t.Fatalf("the test did not pass in the namespace")
	}
}

// realNFT runs inside the namespace.
func realNFT(t *testing.T) {
	ctx := context.Background()
	nft, err := NewNFT("")
	if err != nil {
		t.Fatalf("NewNFT: %v", err)
	}
	p := New(nft, Config{ClusterCIDR: cidr})
	p.SetService(service("svc1", "172.30.0.41", clientIP))
	p.SetEndpointSlice(slice("svc1", "s1", ep{"10.180.0.1", "ready"}, ep{"10.180.0.2", "ready"}, ep{"10.180.0.3", "ready"}))
	p.SetService(service("np", "172.30.0.42", nodePort(30080)))
	p.SetEndpointSlice(slice("np", "n1", ep{"10.180.0.7", "ready"}))
	p.SetService(service("empty", "172.30.0.43"))
	if _, err := p.Sync(ctx); err != nil {
		t.Fatalf("full Sync: %v", err)
	}
	list := func() string {
		t.Helper()
		out, err := exec.Command("nft", "list", "table", "ip", TableName).CombinedOutput()
		if err != nil {
			t.Fatalf("nft list table: %v: %s", err, out)
		}
		return string(out)
	}
	table := list()
	for _, want := range []string{
		"chain " + svc1Chain,
		"chain " + svc1Ep1,
		"numgen random mod 3 vmap",
		"set affinity-5OJB2KTY-ns1/svc1/tcp/p80__10.180.0.1/80",
		"update @affinity-5OJB2KTY-ns1/svc1/tcp/p80__10.180.0.1/80 { ip saddr }",
		"ip saddr @affinity-5OJB2KTY-ns1/svc1/tcp/p80__10.180.0.1/80 goto " + svc1Ep1,
		"172.30.0.41 . tcp . 80 : goto " + svc1Chain,
		"tcp . 30080 : goto external-",
		"172.30.0.43 . tcp . 80 : goto reject-chain",
		"meta l4proto tcp dnat ip to numgen random mod 1 map { 0 : 10.180.0.7 . 80 }",
		"10.180.0.7 . 10.180.0.7", // hairpin
		"ct status dnat ip saddr . ip daddr @hairpin jump mark-for-masquerade",
		"masquerade fully-random",
		"type nat hook prerouting priority dstnat",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("nft list table has no %q", want)
		}
	}

	// Incremental: svc1 deleted, empty gets an endpoint.
	p.DeleteService(types.NamespacedName{Namespace: "ns1", Name: "svc1"})
	p.SetEndpointSlice(slice("empty", "e1", ep{"10.180.0.9", "ready"}))
	if res, err := p.Sync(ctx); err != nil || res.Full {
		t.Fatalf("incremental Sync: %+v, %v", res, err)
	}
	table = list()
	for _, gone := range []string{"ns1/svc1/", "172.30.0.41", ": goto reject-chain", "10.180.0.1 . 10.180.0.1"} {
		if strings.Contains(table, gone) {
			t.Errorf("after the update nft list table still has %q:\n%s", gone, table)
		}
	}
	if !strings.Contains(table, "map { 0 : 10.180.0.9 . 80 }") || !strings.Contains(table, "10.180.0.9 . 10.180.0.9") {
		t.Errorf("after the update no DNAT to the new endpoint, or no hairpin element:\n%s", table)
	}

	// Restart: a new Proxier takes the table over; np deleted meanwhile.
	p2 := New(nft, Config{ClusterCIDR: cidr})
	p2.SetService(service("empty", "172.30.0.43"))
	p2.SetEndpointSlice(slice("empty", "e1", ep{"10.180.0.9", "ready"}))
	if _, err := p2.Sync(ctx); err != nil {
		t.Fatalf("Sync after restart: %v", err)
	}
	table = list()
	if strings.Contains(table, "ns1/np/") || strings.Contains(table, "30080") || strings.Contains(table, "10.180.0.7") {
		t.Errorf("after restart the deleted Service's rules remain:\n%s", table)
	}
	if !strings.Contains(table, "map { 0 : 10.180.0.9 . 80 }") {
		t.Errorf("after restart the kept Service's rules are gone:\n%s", table)
	}
}

// TestNetlinkMatchesNFT drives one Proxier through changes of every kind
// with its incremental Syncs over netlink, then rewrites the same state in
// full through nft: nft must list the same tables both times, so the
// netlink translation of every rule, set and element is what nft makes.
func TestNetlinkMatchesNFT(t *testing.T) {
	inOwnNetNS(t, "TestNetlinkMatchesNFT", func(t *testing.T) { netlinkMatchesNFT(t, 0) })
}

// TestNetlinkMatchesNFTShards is TestNetlinkMatchesNFT with 2 Services a
// shard table: the Services move as shards come (and their hairpin
// elements with them), and every table must list as nft writes it.
func TestNetlinkMatchesNFTShards(t *testing.T) {
	inOwnNetNS(t, "TestNetlinkMatchesNFTShards", func(t *testing.T) { netlinkMatchesNFT(t, 2) })
}

func netlinkMatchesNFT(t *testing.T, shardServices int) {
	ctx := context.Background()
	nft, err := NewNFT("")
	if err != nil {
		t.Fatalf("NewNFT: %v", err)
	}
	p := New(nft, Config{ClusterCIDR: cidr, Netlink: true, NodeName: thisNode, ShardServices: shardServices})
	p.SetService(service("keep", "172.30.0.40"))
	p.SetEndpointSlice(slice("keep", "k1", ep{"10.180.0.20", "ready"}))
	p.SetService(service("gone", "172.30.0.44", clientIP, nodePort(30090)))
	p.SetEndpointSlice(slice("gone", "g1", ep{"10.180.0.30", "ready"}))
	if res, err := p.Sync(ctx); err != nil || !res.Full {
		t.Fatalf("first Sync: %+v, %v", res, err)
	}
	steps := []func(){
		func() { // affinity, three endpoints
			p.SetService(service("svc1", "172.30.0.41", clientIP))
			p.SetEndpointSlice(slice("svc1", "s1", ep{"10.180.0.1", "ready"}, ep{"10.180.0.2", "ready"}, ep{"10.180.0.3", "ready"}))
		},
		func() { // a NodePort
			p.SetService(service("np", "172.30.0.42", nodePort(30080)))
			p.SetEndpointSlice(slice("np", "n1", ep{"10.180.0.7", "ready"}))
		},
		func() { p.SetService(service("empty", "172.30.0.43", nodePort(30081))) }, // rejected
		func() { // an endpoint unready, one more
			p.SetEndpointSlice(slice("svc1", "s1", ep{"10.180.0.1", "unready"}, ep{"10.180.0.2", "ready"}, ep{"10.180.0.3", "ready"}, ep{"10.180.0.4", "ready"}))
		},
		func() { p.SetEndpointSlice(slice("empty", "e1", ep{"10.180.0.9", "ready"})) }, // no longer rejected
		func() { p.DeleteEndpointSlice(slice("np", "n1")) },                            // now rejected
		func() { p.DeleteService(types.NamespacedName{Namespace: "ns1", Name: "gone"}) },
		func() { // traffic policies Local, externalIPs, a load-balancer IP
			p.SetService(service("itp", "172.30.0.45", internalLocal))
			p.SetEndpointSlice(on(slice("itp", "i1", ep{"10.180.0.11", "ready"}, ep{"10.180.0.12", "ready"}), thisNode, "10.180.0.11"))
			p.SetService(service("etp", "172.30.0.46", loadBalancer(30085, "203.0.113.20", "203.0.113.21"), externalLocal, withExternalIPs("203.0.113.10")))
			p.SetEndpointSlice(on(slice("etp", "e1", ep{"10.180.0.13", "ready"}, ep{"10.180.0.14", "ready"}), thisNode, "10.180.0.13"))
		},
		func() { // loadBalancerSourceRanges
			p.SetService(service("fw", "172.30.0.47", loadBalancer(30086, "203.0.113.30", "203.0.113.31"), func(svc *v1.Service) {
				svc.Spec.LoadBalancerSourceRanges = []string{"10.0.0.0/8", "192.168.77.2/32", "198.51.100.0/24"}
			}))
			p.SetEndpointSlice(slice("fw", "f1", ep{"10.180.0.15", "ready"}))
		},
		func() { // no local endpoint left: dropped
			p.SetEndpointSlice(on(slice("itp", "i1", ep{"10.180.0.11", "unready"}, ep{"10.180.0.12", "ready"}), thisNode, "10.180.0.11"))
			p.SetEndpointSlice(on(slice("etp", "e1", ep{"10.180.0.13", "unready"}, ep{"10.180.0.14", "ready"}), thisNode, "10.180.0.13"))
		},
		func() { // three endpoints without affinity, one of them svc1's too
			p.SetService(service("multi", "172.30.0.48"))
			p.SetEndpointSlice(slice("multi", "m1", ep{"10.180.0.2", "ready"}, ep{"10.180.0.21", "ready"}, ep{"10.180.0.22", "ready"}))
		},
		func() { // one unready: its hairpin element goes
			p.SetEndpointSlice(slice("multi", "m1", ep{"10.180.0.2", "ready"}, ep{"10.180.0.21", "unready"}, ep{"10.180.0.22", "ready"}))
		},
		func() { // svc1 drops 10.180.0.2: its hairpin element stays, for multi
			p.SetEndpointSlice(slice("svc1", "s1", ep{"10.180.0.1", "unready"}, ep{"10.180.0.3", "ready"}, ep{"10.180.0.4", "ready"}))
		},
	}
	for i, step := range steps {
		step()
		res, err := p.Sync(ctx)
		if err != nil || res.Full || res.Ops == 0 {
			t.Fatalf("step %d: incremental Sync over netlink: %+v, %v", i, res, err)
		}
	}
	list := func() []string { // every table of the namespace: the proxy's
		t.Helper()
		out, err := exec.Command("nft", "list", "ruleset").CombinedOutput()
		if err != nil {
			t.Fatalf("nft list ruleset: %v: %s", err, out)
		}
		return normalizeListing(string(out))
	}
	// google/nftables marks every anonymous set's keys big-endian for
	// nft's printer; the numgen maps' keys are host-order integers (as the
	// kernel compares them, see TestTrafficNetlink), so nft prints those it
	// did not write byte-swapped. No other map has integer keys.
	viaNetlink := list()
	for i, l := range viaNetlink {
		if k, rest, ok := strings.Cut(l, " : "); ok {
			if n, err := strconv.ParseUint(k, 10, 32); err == nil {
				viaNetlink[i] = strconv.FormatUint(uint64(bits.ReverseBytes32(uint32(n))), 10) + " : " + rest
			}
		}
	}
	sort.Strings(viaNetlink)
	shards := p.shards
	p.Resync()
	if res, err := p.Sync(ctx); err != nil || !res.Full || res.Shards != shards {
		t.Fatalf("full rewrite: %+v, %v; want %d shards as before", res, err, shards)
	}
	viaNFT := list()
	if strings.Join(viaNetlink, "\n") != strings.Join(viaNFT, "\n") {
		t.Errorf("the table written over netlink lists as\n%s\n\nthe same state written by nft as\n%s",
			strings.Join(viaNetlink, "\n"), strings.Join(viaNFT, "\n"))
	}
	for _, want := range []string{"numgen random mod 2 vmap {", "update @affinity-", "meta l4proto tcp dnat to 10.180.0.3:80",
		"meta l4proto tcp dnat ip to numgen random mod 2 map {", "1 : 10.180.0.2 . 80", "0 : 10.180.0.22 . 80", "0 : 10.180.0.9 . 80",
		"10.180.0.2 . 10.180.0.2", "10.180.0.22 . 10.180.0.22", "tcp . 30080 : goto reject-chain",
		"fib saddr type local goto service-", "ip saddr " + cidr + " goto service-", "tcp . 30085 : drop", "172.30.0.45 . tcp . 80 : drop",
		"203.0.113.10 . tcp . 80 : goto external-", "ip saddr != { 10.0.0.0/8", "198.51.100.0/24 } drop", // split at commas
		"203.0.113.30 . tcp . 80 : goto firewall-"} {
		if !slices.ContainsFunc(viaNetlink, func(l string) bool { return strings.Contains(l, want) }) {
			t.Errorf("the table has no %q", want)
		}
	}
}

// normalizeListing makes nft list output comparable regardless of the
// order objects were created in: one item per line (map elements split,
// those of a rule's anonymous map too), sorted, blank lines dropped.
func normalizeListing(s string) []string {
	var out []string
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		line = strings.TrimPrefix(line, "elements = {")
		if i := strings.Index(line, "map { "); i >= 0 {
			out = append(out, line[:i+len("map {")])
			line = line[i+len("map { "):]
		}
		for _, part := range strings.Split(line, ",") {
			part = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(part), "}"))
			if part != "" {
				out = append(out, part)
			}
		}
	}
	sort.Strings(out)
	return out
}

// deleteProxyTables deletes the proxy's tables (every shard) in the
// namespace the test runs in.
func deleteProxyTables(t *testing.T) {
	t.Helper()
	out, err := exec.Command("nft", "list", "tables", "ip").Output()
	if err != nil {
		t.Fatalf("nft list tables: %v", err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		name, ok := strings.CutPrefix(strings.TrimSpace(line), "table ip ")
		if _, mine := parseShardTable(name); ok && mine {
			if out, err := exec.Command("nft", "delete", "table", "ip", name).CombinedOutput(); err != nil {
				t.Fatalf("nft delete table %s: %v: %s", name, err, out)
			}
		}
	}
}
