package topologies_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/ops/topologies"
	"github.com/cairn-dev/cairn/services/netns"
)

// TestCutAndHeal: a host reaches another on its address, not while the
// other is cut off (the dial times out, nothing answers), and again once it
// is healed; a host has no route but its own subnet.
func TestCutAndHeal(t *testing.T) {
	tp := topologies.New(t, "a", "b")
	a, b := tp.Host("a"), tp.Host("b")
	if a.Addr != "10.77.0.1" || b.Addr != "10.77.0.2" {
		t.Fatalf("addresses %s %s, want 10.77.0.1 10.77.0.2", a.Addr, b.Addr)
	}
	ln, err := netns.Listen(b.NS, "tcp", net.JoinHostPort(b.Addr, "7000"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	dial := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		c, err := netns.DialContext(ctx, a.NS, "tcp", ln.Addr().String())
		if err == nil {
			c.Close()
		}
		return err
	}
	if err := dial(); err != nil {
		t.Fatalf("a to b: %v", err)
	}
	b.Cut()
	if err := dial(); err == nil {
		t.Fatal("a reached b while b was cut off")
	}
	b.Heal()
	deadline := time.Now().Add(10 * time.Second)
	for err := dial(); err != nil; err = dial() {
		if time.Now().After(deadline) {
			t.Fatalf("a to b after heal: %v", err)
		}
	}
	out, err := a.Command("ip", "route").CombinedOutput()
	if err != nil {
		t.Fatalf("ip route: %v: %s", err, out)
	}
	if got := string(out); got != "10.77.0.0/24 dev eth0 proto kernel scope link src 10.77.0.1 \n" {
		t.Errorf("routes of a:\n%s\nwant only its subnet", got)
	}
}
