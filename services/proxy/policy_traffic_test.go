package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/knftables"

	"github.com/cairn-dev/cairn/services/netns"
)

// TestTrafficPolicies sends real connections through traffic-policy rules
// written over netlink. The test's own namespace is the node; it makes two
// more, linked to it by veth pairs: "pods" holds the endpoints 10.180.0.1
// (on this node, by its slice) and 10.180.0.2 (on another node, by its
// slice), "outside" a client 192.168.77.2 that reaches the node at
// 192.168.77.1. Each endpoint answers with its address and the client's
// address it sees.
func TestTrafficPolicies(t *testing.T) {
	inOwnNetNS(t, "TestTrafficPolicies", trafficPolicies)
}

func trafficPolicies(t *testing.T) {
	ctx := context.Background()
	pods, outside := childNetNS(t), childNetNS(t)
	if err := os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0o644); err != nil {
		t.Fatalf("ip_forward: %v", err)
	}
	sh(t, "", "ip link set lo up",
		"ip link add pod0 type veth peer name pod1 netns "+pods.pid,
		"ip addr add 10.180.0.254/24 dev pod0", "ip link set pod0 up",
		"ip link add ext0 type veth peer name ext1 netns "+outside.pid,
		"ip addr add 192.168.77.1/24 dev ext0", "ip link set ext0 up",
		// The node's own connections to ClusterIPs leave from its pod
		// link's address (as RunNode's route does from 100.64.0.1).
		"ip route add 172.30.0.0/16 dev lo src 10.180.0.254",
		// External addresses route nowhere (a node's default route
		// would carry them): found in the maps, or refused by the
		// forward hook, or dropped on lo.
		"ip route add 203.0.113.0/24 dev lo")
	sh(t, pods.path, "ip link set lo up", "ip link set pod1 up",
		"ip addr add 10.180.0.1/24 dev pod1", "ip addr add 10.180.0.2/24 dev pod1",
		"ip route add default via 10.180.0.254")
	sh(t, outside.path, "ip link set lo up", "ip link set ext1 up",
		"ip addr add 192.168.77.2/24 dev ext1", "ip route add default via 192.168.77.1")
	for _, ip := range []string{"10.180.0.1", "10.180.0.2"} {
		serveSource(t, pods.path, ip+":8080")
	}

	nft, err := NewNFT("")
	if err != nil {
		t.Fatalf("NewNFT: %v", err)
	}
	p := New(nft, Config{ClusterCIDR: cidr, NodeName: thisNode, Netlink: true})
	p.SetNodeLabels(map[string]string{v1.LabelTopologyZone: "zone-a"})
	hs := newHealthServer("", slog.New(slog.DiscardHandler), func() bool { return true })
	defer hs.close()
	sync := func(wantFull bool) {
		t.Helper()
		res, err := p.Sync(ctx)
		if err != nil || res.Full != wantFull {
			t.Fatalf("Sync: %+v, %v (want full %v)", res, err, wantFull)
		}
		hs.sync(p.HealthChecks())
	}
	// The first Sync is full (nft); the Services come in the next,
	// over netlink.
	p.SetService(service("first", "172.30.0.40"))
	sync(true)

	both := func(name string, states ...string) *discovery.EndpointSlice {
		s := slice(name, name+"-1", ep{"10.180.0.1", states[0]}, ep{"10.180.0.2", states[1]})
		s.Ports[0].Port = knftables.PtrTo(int32(8080))
		return on(on(s, thisNode, "10.180.0.1"), "node-b", "10.180.0.2")
	}
	add := func(svc *v1.Service, s *discovery.EndpointSlice) {
		svc.Spec.Ports[0].TargetPort.IntVal = 8080
		p.SetService(svc)
		p.SetEndpointSlice(s)
	}
	add(service("itp", "172.30.0.45", internalLocal), both("itp", "ready", "ready"))
	add(service("itp-none", "172.30.0.46", internalLocal), both("itp-none", "unready", "ready"))
	lb := service("etp", "172.30.0.47", loadBalancer(30080, "203.0.113.20", "203.0.113.21"), externalLocal, withExternalIPs("203.0.113.10"))
	lb.Spec.HealthCheckNodePort = 30999
	add(lb, both("etp", "ready", "ready"))
	add(service("etc", "172.30.0.48", nodePort(30081)), both("etc", "ready", "ready"))
	add(service("zone", "172.30.0.49"), hinted(both("zone", "ready", "ready"),
		map[string]string{"10.180.0.1": "zone-b", "10.180.0.2": "zone-a"}))
	add(service("term", "172.30.0.50", internalLocal), both("term", "terminating", "ready"))
	ranges := func(r ...string) func(*v1.Service) {
		return func(svc *v1.Service) { svc.Spec.LoadBalancerSourceRanges = r }
	}
	add(service("fw-allow", "172.30.0.51", loadBalancer(30082, "203.0.113.30", "203.0.113.39"), ranges("10.0.0.0/8", "192.168.77.2/32")), both("fw-allow", "ready", "ready"))
	add(service("fw-deny", "172.30.0.52", loadBalancer(30083, "203.0.113.31", "203.0.113.39"), ranges("10.0.0.0/8", "198.51.100.0/24")), both("fw-deny", "ready", "ready"))
	sync(false)

	// reached fetches addr n times from the namespace ns ("" the node's)
	// and returns what answered: endpoint and client address seen.
	reached := func(ns, addr string, n int) map[string]int {
		t.Helper()
		seen := map[string]int{}
		for range n {
			got, err := fetchIn(ns, addr)
			if err != nil {
				t.Fatalf("fetch %s from %q: %v", addr, ns, err)
			}
			seen[got]++
		}
		return seen
	}
	only := func(what string, seen map[string]int, want string) {
		t.Helper()
		if len(seen) != 1 || seen[want] == 0 {
			t.Errorf("%s reached %v, want only %q", what, seen, want)
		}
	}
	const fromNode = "10.180.0.254"
	const client = "192.168.77.2"
	only("internalTrafficPolicy Local", reached("", "172.30.0.45:80", 20), "10.180.0.1:8080 "+fromNode)
	if _, err := fetchIn("", "172.30.0.46:80"); !isTimeout(err) {
		t.Errorf("internalTrafficPolicy Local without a local endpoint: %v, want dropped (a timeout)", err)
	}
	only("a terminating local endpoint", reached("", "172.30.0.50:80", 10), "10.180.0.1:8080 "+fromNode)
	only("zone hints (node in zone-a)", reached("", "172.30.0.49:80", 20), "10.180.0.2:8080 "+fromNode)

	// externalTrafficPolicy Local from outside: the local endpoint, the
	// client's own address kept; by NodePort, externalIP and
	// load-balancer IP.
	for _, addr := range []string{"192.168.77.1:30080", "203.0.113.10:80", "203.0.113.20:80"} {
		only("externalTrafficPolicy Local at "+addr, reached(outside.path, addr, 20), "10.180.0.1:8080 "+client)
	}
	// The load-balancer IP with ipMode Proxy is not the proxy's.
	if got, err := fetchIn(outside.path, "203.0.113.21:80"); err == nil {
		t.Errorf("ipMode Proxy ingress IP answered: %q", got)
	}
	// From the node itself: short-circuited to every endpoint.
	if seen := reached("", "192.168.77.1:30080", 40); len(seen) != 2 {
		t.Errorf("externalTrafficPolicy Local NodePort from the node reached %v, want both endpoints", seen)
	}
	// externalTrafficPolicy Cluster: masqueraded to the node's address.
	for got := range reached(outside.path, "192.168.77.1:30081", 20) {
		if !strings.HasSuffix(got, " "+fromNode) {
			t.Errorf("externalTrafficPolicy Cluster: %q, want the client masqueraded to %s", got, fromNode)
		}
	}
	// loadBalancerSourceRanges: the load-balancer IP answers the client
	// in a range, drops one outside; the NodePort is not subject to it.
	if seen := reached(outside.path, "203.0.113.30:80", 20); len(seen) != 2 {
		t.Errorf("a load-balancer IP whose source ranges hold the client reached %v, want both endpoints", seen)
	}
	if _, err := fetchIn(outside.path, "203.0.113.31:80"); !isTimeout(err) {
		t.Errorf("a load-balancer IP whose source ranges do not hold the client: %v, want dropped (a timeout)", err)
	}
	reached(outside.path, "192.168.77.1:30083", 5)
	if code, body := getHealth(t, outside.path, "192.168.77.1:30999"); code != http.StatusOK || body.LocalEndpoints != 1 || body.Service.Name != "etp" {
		t.Errorf("health check: %d %+v, want 200 with 1 local endpoint", code, body)
	}

	// The local endpoint goes unready: external traffic is dropped, the
	// health check fails, the ClusterIP still answers from the other.
	p.SetEndpointSlice(both("etp", "unready", "ready"))
	sync(false)
	if _, err := fetchIn(outside.path, "192.168.77.1:30080"); !isTimeout(err) {
		t.Errorf("externalTrafficPolicy Local without a local endpoint: %v, want dropped (a timeout)", err)
	}
	if code, body := getHealth(t, outside.path, "192.168.77.1:30999"); code != http.StatusServiceUnavailable || body.LocalEndpoints != 0 {
		t.Errorf("health check: %d %+v, want 503 with 0 local endpoints", code, body)
	}
	only("the ClusterIP of etp", reached("", "172.30.0.47:80", 10), "10.180.0.2:8080 "+fromNode)

	// No endpoint anywhere: refused, and the health check is gone with
	// the Service.
	p.SetEndpointSlice(both("etp", "unready", "unready"))
	sync(false)
	if _, err := fetchIn(outside.path, "203.0.113.10:80"); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("externalIP without endpoints: %v, want refused", err)
	}
	p.DeleteService(types.NamespacedName{Namespace: "ns1", Name: "etp"})
	sync(false)
	if code, _ := getHealth(t, outside.path, "192.168.77.1:30999"); code != 0 {
		t.Errorf("health check of a deleted Service answered %d", code)
	}
}

// netNS is a network namespace a test made: a process sleeping in it.
type netNS struct{ pid, path string }

// childNetNS starts a process in a new network namespace, ended (by its
// pid) when the test ends.
func childNetNS(t *testing.T) netNS {
	t.Helper()
	cmd := exec.Command("unshare", "--net", "--", "sleep", "600")
	if err := cmd.Start(); err != nil {
		t.Fatalf("unshare: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	pid := strconv.Itoa(cmd.Process.Pid)
	path := "/proc/" + pid + "/ns/net"
	self, _ := os.Readlink("/proc/self/ns/net")
	for range 100 {
		if ns, err := os.Readlink(path); err == nil && ns != self {
			return netNS{pid: pid, path: path}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("process %s did not enter a namespace of its own", pid)
	return netNS{}
}

// sh runs each command line in the namespace at ns ("" the test's own).
func sh(t *testing.T, ns string, lines ...string) {
	t.Helper()
	for _, line := range lines {
		args := strings.Fields(line)
		if ns != "" {
			args = append([]string{"nsenter", "--net=" + ns, "--"}, args...)
		}
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v: %s", line, err, out)
		}
	}
}

// serveSource answers every connection on addr, in the namespace at ns,
// with addr and the client's address.
func serveSource(t *testing.T, ns, addr string) {
	l, err := netns.Listen(ns, "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			host, _, _ := net.SplitHostPort(c.RemoteAddr().String())
			_, _ = fmt.Fprintf(c, "%s %s\n", addr, host)
			c.Close()
		}
	}()
}

// dialIn connects from the namespace at ns ("" the test's own).
func dialIn(ctx context.Context, ns, addr string) (net.Conn, error) {
	if ns == "" {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", addr)
	}
	return netns.DialContext(ctx, ns, "tcp", addr)
}

func fetchIn(ns, addr string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
	defer cancel()
	c, err := dialIn(ctx, ns, addr)
	if err != nil {
		return "", err
	}
	return answer(c)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// healthBody is kube-proxy's health check answer.
type healthBody struct {
	Service struct {
		Namespace, Name string
	}
	LocalEndpoints      int  `json:"localEndpoints"`
	ServiceProxyHealthy bool `json:"serviceProxyHealthy"`
}

// getHealth GETs http://addr/healthz from the namespace at ns; code 0
// when nothing answers.
func getHealth(t *testing.T, ns, addr string) (int, healthBody) {
	t.Helper()
	tr := &http.Transport{DisableKeepAlives: true, DialContext: func(ctx context.Context, _, a string) (net.Conn, error) {
		return dialIn(ctx, ns, a)
	}}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 2 * time.Second}
	resp, err := client.Get("http://" + addr + "/healthz")
	if err != nil {
		return 0, healthBody{}
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var body healthBody
	if err := json.Unmarshal(raw, &body); err != nil {
		t.Errorf("health check body %q: %v", raw, err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("health check Content-Type %q", ct)
	}
	return resp.StatusCode, body
}

// TestTrafficHairpin sends real connections from a pod to itself through
// its Service: the reply would come back to the pod from its own address,
// which it drops, unless the node masquerades the connection (the hairpin
// set, checked in postrouting). The test's namespace is the node (at
// 10.180.0.254); two more, each behind a veth pair, are the pods 10.180.0.1
// and 10.180.0.2, both in ClusterCIDR so that nothing else masquerades
// them. One Service a shard table, so a connection meets the postrouting
// chains of tables that do not hold its endpoint, and the Syncs after the
// first go over netlink.
func TestTrafficHairpin(t *testing.T) {
	inOwnNetNS(t, "TestTrafficHairpin", trafficHairpin)
}

func trafficHairpin(t *testing.T) {
	ctx := context.Background()
	if err := os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0o644); err != nil {
		t.Fatalf("ip_forward: %v", err)
	}
	sh(t, "", "ip link set lo up")
	pods := map[string]netNS{}
	for i, ip := range []string{"10.180.0.1", "10.180.0.2"} {
		pod := childNetNS(t)
		pods[ip] = pod
		node, peer := fmt.Sprintf("pod%d", i), fmt.Sprintf("eth%d", i)
		sh(t, "", "ip link add "+node+" type veth peer name "+peer+" netns "+pod.pid,
			"ip addr add 10.180.0.254/32 dev "+node, "ip link set "+node+" up",
			"ip route add "+ip+"/32 dev "+node+" src 10.180.0.254")
		sh(t, pod.path, "ip link set lo up", "ip link set "+peer+" up",
			"ip addr add "+ip+"/32 dev "+peer, "ip route add 10.180.0.254/32 dev "+peer,
			"ip route add default via 10.180.0.254 dev "+peer)
		serveSource(t, pod.path, ip+":8080")
	}

	nft, err := NewNFT("")
	if err != nil {
		t.Fatalf("NewNFT: %v", err)
	}
	p := New(nft, Config{ClusterCIDR: "10.180.0.0/24", Netlink: true, ShardServices: 1})
	sync := func() {
		t.Helper()
		if _, err := p.Sync(ctx); err != nil {
			t.Fatalf("Sync: %v", err)
		}
	}
	p.SetService(service("first", "172.30.0.60"))
	sync() // full, through nft; the rest over netlink
	to := func(name, ip string, mutate ...func(*v1.Service)) {
		svc := service(name, ip, mutate...)
		svc.Spec.Ports[0].TargetPort.IntVal = 8080
		p.SetService(svc)
	}
	endpoints := func(name string, ips ...string) {
		var eps []ep
		for _, ip := range ips {
			eps = append(eps, ep{ip, "ready"})
		}
		s := slice(name, name+"-1", eps...)
		s.Ports[0].Port = knftables.PtrTo(int32(8080))
		p.SetEndpointSlice(s)
	}
	to("self", "172.30.0.61")
	endpoints("self", "10.180.0.1")
	to("peer", "172.30.0.62")
	endpoints("peer", "10.180.0.2")
	to("sticky", "172.30.0.63", clientIP)
	endpoints("sticky", "10.180.0.1")
	sync()
	// self's and peer's hairpin elements are in two tables, so at least
	// one of their connections passes a table without its element first.
	if home := func(name string) int { return p.home[types.NamespacedName{Namespace: "ns1", Name: name}] }; p.shards < 3 || home("self") == home("peer") {
		t.Fatalf("%d shards for 4 Services of 1 a shard, self in %d, peer in %d", p.shards, home("self"), home("peer"))
	}

	// expect: from src, the Service at addr answers as want ("endpoint
	// client-seen"); 10.180.0.254 is the node's address, a masqueraded one.
	expect := func(src, addr, want string) {
		t.Helper()
		for range 3 {
			got, err := fetchFrom(pods[src].path, src, addr)
			if err != nil || got != want {
				t.Errorf("from %s to %s: %q, %v; want %q", src, addr, got, err, want)
				return
			}
		}
	}
	expect("10.180.0.1", "172.30.0.61:80", "10.180.0.1:8080 10.180.0.254") // to itself: masqueraded
	expect("10.180.0.2", "172.30.0.61:80", "10.180.0.1:8080 10.180.0.2")   // to another pod: not
	expect("10.180.0.2", "172.30.0.62:80", "10.180.0.2:8080 10.180.0.254")
	expect("10.180.0.1", "172.30.0.63:80", "10.180.0.1:8080 10.180.0.254") // through an affinity endpoint chain

	// self moves to 10.180.0.2: its table's set follows; 10.180.0.1 stays
	// in sticky's.
	endpoints("self", "10.180.0.2")
	sync()
	expect("10.180.0.2", "172.30.0.61:80", "10.180.0.2:8080 10.180.0.254")
	expect("10.180.0.1", "172.30.0.61:80", "10.180.0.2:8080 10.180.0.1")
	expect("10.180.0.1", "172.30.0.63:80", "10.180.0.1:8080 10.180.0.254")

	// sticky deleted: no Service has 10.180.0.1, whose connections to
	// 10.180.0.2 are still not masqueraded.
	p.DeleteService(types.NamespacedName{Namespace: "ns1", Name: "sticky"})
	p.DeleteEndpointSlice(slice("sticky", "sticky-1"))
	sync()
	expect("10.180.0.1", "172.30.0.62:80", "10.180.0.2:8080 10.180.0.1")
	expect("10.180.0.2", "172.30.0.62:80", "10.180.0.2:8080 10.180.0.254")
	out, err := exec.Command("nft", "list", "ruleset").CombinedOutput()
	if err != nil {
		t.Fatalf("nft list ruleset: %v: %s", err, out)
	}
	if strings.Contains(string(out), "10.180.0.1 . 10.180.0.1") {
		t.Errorf("no Service has 10.180.0.1 but a hairpin set still does:\n%s", out)
	}
}

// fetchFrom is fetchIn from the local address src.
func fetchFrom(ns, src, addr string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
	defer cancel()
	var c net.Conn
	err := netns.Do(ns, func() error {
		var err error
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, FallbackDelay: -1}
		c, err = d.DialContext(ctx, "tcp", addr)
		return err
	})
	if err != nil {
		return "", err
	}
	return answer(c)
}
