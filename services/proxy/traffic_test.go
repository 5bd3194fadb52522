package proxy

import (
	"bufio"
	"context"
	"errors"
	"net"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/knftables"
)

// TestTraffic connects to ClusterIPs through the real rules, all inside a
// network namespace of the test's own: two endpoints are addresses of a
// the namespace's loopback, each with a server answering its own address.
func TestTraffic(t *testing.T) {
	inOwnNetNS(t, "TestTraffic", func(t *testing.T) { traffic(t, Config{ClusterCIDR: cidr}) })
}

// TestTrafficNetlink is TestTraffic with the incremental Syncs (an
// endpoint going unready, the Service deleted) written over netlink.
func TestTrafficNetlink(t *testing.T) {
	inOwnNetNS(t, "TestTrafficNetlink", func(t *testing.T) { traffic(t, Config{ClusterCIDR: cidr, Netlink: true}) })
}

func traffic(t *testing.T, cfg Config) *Proxier {
	ctx := context.Background()
	for _, args := range [][]string{
		{"link", "set", "lo", "up"},
		{"addr", "add", "10.180.0.1/32", "dev", "lo"},
		{"addr", "add", "10.180.0.2/32", "dev", "lo"},
		// The ClusterIP range routes to lo: nothing leaves the namespace
		// (which has no other interface anyway).
		{"route", "add", "172.30.0.0/16", "dev", "lo"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v: %s", args, err, out)
		}
	}
	for _, ip := range []string{"10.180.0.1", "10.180.0.2"} {
		serve(t, ip+":8080")
	}

	nft, err := NewNFT("")
	if err != nil {
		t.Fatalf("NewNFT: %v", err)
	}
	p := New(nft, cfg)
	web := service("web", "172.30.0.41")
	web.Spec.Ports[0].TargetPort.IntVal = 8080
	p.SetService(web)
	s := slice("web", "w1", ep{"10.180.0.1", "ready"}, ep{"10.180.0.2", "ready"})
	s.Ports[0].Port = knftables.PtrTo(int32(8080))
	p.SetEndpointSlice(s)
	p.SetService(service("empty", "172.30.0.43"))
	if _, err := p.Sync(ctx); err != nil {
		t.Fatalf("Sync: %v", err)
	}

	seen := map[string]int{}
	for range 40 {
		got, err := fetch("172.30.0.41:80")
		if err != nil {
			t.Fatalf("connect to the ClusterIP: %v", err)
		}
		seen[got]++
	}
	if len(seen) != 2 || seen["10.180.0.1:8080"] == 0 || seen["10.180.0.2:8080"] == 0 {
		t.Errorf("40 connections reached %v, want both endpoints", seen)
	}
	if _, err := fetch("172.30.0.43:80"); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("connect to a Service without endpoints: %v, want connection refused", err)
	}

	// sessionAffinity ClientIP: after the first connection, the same
	// client always reaches the same endpoint.
	sticky := service("sticky", "172.30.0.44", clientIP)
	sticky.Spec.Ports[0].TargetPort.IntVal = 8080
	p.SetService(sticky)
	ss := slice("sticky", "st1", ep{"10.180.0.1", "ready"}, ep{"10.180.0.2", "ready"})
	ss.Ports[0].Port = knftables.PtrTo(int32(8080))
	p.SetEndpointSlice(ss)
	if _, err := p.Sync(ctx); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	first, err := fetch("172.30.0.44:80")
	if err != nil {
		t.Fatalf("connect to the sticky ClusterIP: %v", err)
	}
	for range 20 {
		if got, err := fetch("172.30.0.44:80"); err != nil || got != first {
			t.Fatalf("with ClientIP affinity a connection reached %q, %v; the first reached %s", got, err, first)
		}
	}

	// One endpoint goes unready: only the other answers.
	s = slice("web", "w1", ep{"10.180.0.1", "unready"}, ep{"10.180.0.2", "ready"})
	s.Ports[0].Port = knftables.PtrTo(int32(8080))
	p.SetEndpointSlice(s)
	if res, err := p.Sync(ctx); err != nil || res.Full {
		t.Fatalf("incremental Sync: %+v, %v", res, err)
	}
	for range 10 {
		if got, err := fetch("172.30.0.41:80"); err != nil || got != "10.180.0.2:8080" {
			t.Fatalf("after 10.180.0.1 went unready: %q, %v", got, err)
		}
	}

	// Ready again: both answer again (with Netlink, the rewritten service
	// chain's numgen map came over netlink).
	s = slice("web", "w1", ep{"10.180.0.1", "ready"}, ep{"10.180.0.2", "ready"})
	s.Ports[0].Port = knftables.PtrTo(int32(8080))
	p.SetEndpointSlice(s)
	if res, err := p.Sync(ctx); err != nil || res.Full {
		t.Fatalf("incremental Sync: %+v, %v", res, err)
	}
	clear(seen)
	for range 40 {
		got, err := fetch("172.30.0.41:80")
		if err != nil {
			t.Fatalf("connect to the ClusterIP: %v", err)
		}
		seen[got]++
	}
	if len(seen) != 2 {
		t.Errorf("40 connections after the endpoint came back reached %v, want both endpoints", seen)
	}

	// Deleted: the ClusterIP no longer leads anywhere.
	p.DeleteService(types.NamespacedName{Namespace: "ns1", Name: "web"})
	if _, err := p.Sync(ctx); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	if got, err := fetch("172.30.0.41:80"); err == nil {
		t.Errorf("deleted Service still answers: %q", got)
	}
	return p
}

// serve answers every connection on addr with addr and a newline.
func serve(t *testing.T, addr string) {
	l, err := net.Listen("tcp", addr)
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
			_, _ = c.Write([]byte(addr + "\n"))
			c.Close()
		}
	}()
}

func fetch(addr string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, 500*time.Millisecond)
	if err != nil {
		return "", err
	}
	return answer(c)
}

// answer reads the line a test server answers on c, and closes c.
func answer(c net.Conn) (string, error) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return "", err
	}
	return strings.TrimSuffix(line, "\n"), nil
}
