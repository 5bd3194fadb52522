package proxy

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	discovery "k8s.io/api/discovery/v1"
)

// TestSyncCost measures, with the real nft in a network namespace of its
// own, for N Services of 10 endpoints each: the time to program them all,
// the p50/p99 of an incremental Sync after one EndpointSlice change
// written over netlink (as a node's proxy does), with the system time the
// process spent per change (the kernel's commit), in the same run for the
// Services in one table (the layout before shards) and in shards; then,
// sharded, the same changes through nft and a full rewrite (skipped with
// CAIRN_PROXY_COST_NFT=0; CAIRN_PROXY_COST_LAYOUT="shards" or "one table"
// measures only that layout). Set CAIRN_PROXY_COST to a comma-separated
// list of N (e.g. 1000,10000); skipped otherwise.
func TestSyncCost(t *testing.T) {
	if os.Getenv("CAIRN_PROXY_COST") == "" {
		t.Skip("set CAIRN_PROXY_COST=1000,10000 to measure")
	}
	inOwnNetNS(t, "TestSyncCost", syncCost)
}

func syncCost(t *testing.T) {
	ctx := context.Background()
	type layout struct {
		name   string
		shards int // ShardServices; 0: the default
	}
	var summary []string
	p50 := map[string][]time.Duration{}
	for _, f := range strings.Split(os.Getenv("CAIRN_PROXY_COST"), ",") {
		n, err := strconv.Atoi(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range []layout{{"one table", n + 1}, {"shards", 0}} {
			if only := os.Getenv("CAIRN_PROXY_COST_LAYOUT"); only != "" && only != l.name {
				continue
			}
			deleteProxyTables(t)
			nft, err := NewNFT("")
			if err != nil {
				t.Fatal(err)
			}
			p := New(nft, Config{ClusterCIDR: cidr, Netlink: true, ShardServices: l.shards})
			for i := range n {
				p.SetService(service(fmt.Sprintf("s%d", i), fmt.Sprintf("172.%d.%d.%d", 16+i>>16, i>>8&255, i&255)))
				p.SetEndpointSlice(costSlice(i, ""))
			}
			start := time.Now()
			res, err := p.Sync(ctx)
			if err != nil {
				t.Fatalf("full Sync of %d: %v", n, err)
			}
			full := time.Since(start)
			sys0 := sysTime(t)
			lat := changes(t, p, false)
			sys := (sysTime(t) - sys0) / time.Duration(len(lat))
			p50[l.name] = append(p50[l.name], lat[len(lat)/2])
			line := fmt.Sprintf("%d Services x 10 endpoints, %s (%d tables): program all %v; one slice change over netlink p50 %v p99 %v, system time %v a change",
				n, l.name, res.Shards, full.Round(time.Millisecond), lat[len(lat)/2].Round(time.Microsecond), lat[len(lat)*99/100].Round(time.Microsecond), sys.Round(time.Microsecond))
			if l.shards == 0 && os.Getenv("CAIRN_PROXY_COST_NFT") != "0" {
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
				line += fmt.Sprintf("; through nft p50 %v p99 %v; full rewrite %v",
					latNFT[len(latNFT)/2].Round(time.Microsecond), latNFT[len(latNFT)*99/100].Round(time.Microsecond), time.Since(start).Round(time.Millisecond))
			}
			t.Log(line)
			summary = append(summary, line)
		}
	}
	var ratios []string
	for name, ps := range p50 {
		if len(ps) > 1 {
			ratios = append(ratios, fmt.Sprintf("%s: change p50 at the last N / at the first: %.2fx", name, ps[len(ps)-1].Seconds()/ps[0].Seconds()))
		}
	}
	sort.Strings(ratios)
	summary = append(summary, ratios...)
	t.Logf("summary:\n%s", strings.Join(summary, "\n"))
}

// sysTime is the system CPU time the process has used.
func sysTime(t *testing.T) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Stime.Nano())
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
