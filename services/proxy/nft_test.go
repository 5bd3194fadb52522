package proxy

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/knftables"
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
	nft, err := knftables.New(knftables.IPv4Family, TableName)
	if err != nil {
		t.Fatalf("knftables.New: %v", err)
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
		"dnat to 10.180.0.7:80",
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
	for _, gone := range []string{"ns1/svc1/", "172.30.0.41", ": goto reject-chain"} {
		if strings.Contains(table, gone) {
			t.Errorf("after the update nft list table still has %q:\n%s", gone, table)
		}
	}
	if !strings.Contains(table, "dnat to 10.180.0.9:80") {
		t.Errorf("after the update no DNAT to the new endpoint:\n%s", table)
	}

	// Restart: a new Proxier takes the table over; np deleted meanwhile.
	p2 := New(nft, Config{ClusterCIDR: cidr})
	p2.SetService(service("empty", "172.30.0.43"))
	p2.SetEndpointSlice(slice("empty", "e1", ep{"10.180.0.9", "ready"}))
	if _, err := p2.Sync(ctx); err != nil {
		t.Fatalf("Sync after restart: %v", err)
	}
	table = list()
	if strings.Contains(table, "ns1/np/") || strings.Contains(table, "30080") {
		t.Errorf("after restart the deleted Service's rules remain:\n%s", table)
	}
	if !strings.Contains(table, "dnat to 10.180.0.9:80") {
		t.Errorf("after restart the kept Service's rules are gone:\n%s", table)
	}
}
