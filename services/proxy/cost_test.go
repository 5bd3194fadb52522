package proxy

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	discovery "k8s.io/api/discovery/v1"
	"sigs.k8s.io/knftables"
)

// TestSyncCost measures, with the real nft in a network namespace of its
// own, the time to program N Services of 10 endpoints each, the p50/p99 of
// an incremental Sync after one EndpointSlice change, written over netlink
// (as a node's proxy does) and through nft, and a full rewrite of the same
// table. Set CAIRN_PROXY_COST to a comma-separated list of N (e.g.
// 1000,10000); skipped otherwise.
func TestSyncCost(t *testing.T) {
	if os.Getenv("CAIRN_PROXY_COST") == "" {
		t.Skip("set CAIRN_PROXY_COST=1000,10000 to measure")
	}
	inOwnNetNS(t, "TestSyncCost", syncCost)
}

func syncCost(t *testing.T) {
	ctx := context.Background()
	for _, f := range strings.Split(os.Getenv("CAIRN_PROXY_COST"), ",") {
		n, err := strconv.Atoi(f)
		if err != nil {
			t.Fatal(err)
		}
		_ = exec.Command("nft", "delete", "table", "ip", TableName).Run()
		nft, err := knftables.New(knftables.IPv4Family, TableName)
		if err != nil {
			t.Fatal(err)
		}
		p := New(nft, Config{ClusterCIDR: cidr, Netlink: true})
		for i := range n {
			p.SetService(service(fmt.Sprintf("s%d", i), fmt.Sprintf("172.%d.%d.%d", 16+i>>16, i>>8&255, i&255)))
			p.SetEndpointSlice(costSlice(i, ""))
		}
		start := time.Now()
		if _, err := p.Sync(ctx); err != nil {
			t.Fatalf("full Sync of %d: %v", n, err)
		}
		full := time.Since(start)
		lat := changes(t, p, false)
		// The same changes through nft, as before the netlink writer.
		nl := p.nl
		p.nl = nil
		latNFT := changes(t, p, true)
		p.nl = nl

		p.Resync()
		start = time.Now()
		if _, err := p.Sync(ctx); err != nil {
			t.Fatalf("full rewrite: %v", err)
		}
		rewrite := time.Since(start)
		t.Logf("%d Services x 10 endpoints: program all %v; one slice change over netlink p50 %v p99 %v, through nft p50 %v p99 %v; full rewrite %v",
			n, full.Round(time.Millisecond), lat[len(lat)/2].Round(time.Microsecond), lat[len(lat)*99/100].Round(time.Microsecond),
			latNFT[len(latNFT)/2].Round(time.Microsecond), latNFT[len(latNFT)*99/100].Round(time.Microsecond), rewrite.Round(time.Millisecond))
	}
}

// changes makes 50 incremental Syncs of p, each after one slice change:
// the first endpoint of one of 50 Services (all ready at first) goes
// unready, or with back ready again, so that a second run over the same
// Services changes each back. It returns their durations sorted. A Sync
// that writes nothing fails the test.
func changes(t *testing.T, p *Proxier, back bool) []time.Duration {
	t.Helper()
	ctx := context.Background()
	n := len(p.services)
	var lat []time.Duration
	for j := range 50 {
		i := (j * 7919) % n
		state := "unready"
		if back {
			state = ""
		}
		p.SetEndpointSlice(costSlice(i, state))
		start := time.Now()
		res, err := p.Sync(ctx)
		if err != nil || res.Full || res.Ops == 0 {
			t.Fatalf("incremental Sync: %+v, %v", res, err)
		}
		lat = append(lat, time.Since(start))
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	return lat
}

// costSlice is Service i's slice of 10 endpoints; with state "unready" its
// first endpoint is unready.
func costSlice(i int, state string) *discovery.EndpointSlice {
	var eps []ep
	for k := range 10 {
		s := "ready"
		if k == 0 && state == "unready" {
			s = "unready"
		}
		g := i*10 + k
		eps = append(eps, ep{fmt.Sprintf("10.%d.%d.%d", 100+g>>16, g>>8&255, g&255), s})
	}
	return slice(fmt.Sprintf("s%d", i), "e", eps...)
}
