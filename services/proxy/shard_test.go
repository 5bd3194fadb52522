package proxy

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

// TestShardFor: a Service's shard is stable, the Services spread evenly,
// and one shard more (or less) moves only the Services of that shard.
func TestShardFor(t *testing.T) {
	const n = 10000
	keys := make([]types.NamespacedName, n)
	for i := range keys {
		keys[i] = types.NamespacedName{Namespace: fmt.Sprintf("ns%d", i%7), Name: fmt.Sprintf("svc%d", i)}
	}
	for shards := 1; shards <= 20; shards++ {
		count := make([]int, shards)
		for _, k := range keys {
			s := shardFor(k, shards)
			if s != shardFor(k, shards) || s < 0 || s >= shards {
				t.Fatalf("shardFor(%v, %d) = %d", k, shards, s)
			}
			count[s]++
			if shards > 1 {
				if prev := shardFor(k, shards-1); prev != s && s != shards-1 {
					t.Fatalf("%v moved from shard %d to %d going from %d to %d shards: only moves to the new shard are allowed", k, prev, s, shards-1, shards)
				}
			}
		}
		// Binomial spread: within 25% of the mean for 500 a shard and more.
		mean := n / shards
		for i, c := range count {
			if c < mean*3/4 || c > mean*5/4 {
				t.Errorf("%d shards: shard %d has %d of %d Services (mean %d)", shards, i, c, n, mean)
			}
		}
	}
}

func TestShardCount(t *testing.T) {
	for _, tt := range []struct{ n, cur, want int }{
		{0, 0, 1}, {1, 0, 1}, {500, 0, 1}, {501, 0, 2}, {10000, 0, 20},
		{501, 1, 2}, {1001, 2, 3}, // grow as soon as needed
		{500, 2, 2}, {376, 2, 2}, {375, 2, 1}, // shrink only well below
		{7000, 20, 14}, {7200, 20, 20},
	} {
		if got := shardCount(tt.n, 500, tt.cur); got != tt.want {
			t.Errorf("shardCount(%d, 500, %d) = %d, want %d", tt.n, tt.cur, got, tt.want)
		}
	}
}

func TestParseShardTable(t *testing.T) {
	for i := range 30 {
		if got, ok := parseShardTable(shardTable(i)); !ok || got != i {
			t.Errorf("parseShardTable(%q) = %d, %v", shardTable(i), got, ok)
		}
	}
	for _, name := range []string{"kube-proxy", "cairn-proxy-0", "cairn-proxy-01", "cairn-proxy-x", "cairn-proxy-", "cairn-proxyy"} {
		if _, ok := parseShardTable(name); ok {
			t.Errorf("parseShardTable(%q) is the proxy's", name)
		}
	}
}

// TestShards drives a Proxier with 4 Services a shard (on the fake)
// through growth and shrinking: every Service is in exactly the table
// shardFor says, every shard table has the base chains and maps, the
// Syncs that add or remove shards are incremental and write only the
// Services that move, and tables no longer used are deleted, also by a
// restarted proxy that needs fewer.
func TestShards(t *testing.T) {
	fake := newFakeNFT()
	p := New(fake, Config{ClusterCIDR: cidr, ShardServices: 4})
	name := func(i int) string { return fmt.Sprintf("s%d", i) }
	add := func(i int) {
		p.SetService(service(name(i), fmt.Sprintf("172.30.1.%d", i)))
		p.SetEndpointSlice(slice(name(i), "e", ep{fmt.Sprintf("10.180.1.%d", i), "ready"}))
	}
	// check that the tables are those of n shards, each Service of live
	// (its chain, map element and hairpin element) where it belongs and
	// nowhere else.
	check := func(shards int, live []int) {
		t.Helper()
		var want []string
		for i := range shards {
			want = append(want, shardTable(i))
		}
		slices.Sort(want)
		if got := fake.tableNames(); !slices.Equal(got, want) {
			t.Fatalf("tables %v, want %v", got, want)
		}
		for _, table := range want {
			fake.RLock()
			ft := fake.Fake.Tables["ip"][table]
			for _, c := range baseChains {
				if ft.Chains[c.name] == nil {
					t.Errorf("table %s has no chain %s", table, c.name)
				}
			}
			for _, m := range baseMaps {
				if ft.Maps[m.Name] == nil {
					t.Errorf("table %s has no map %s", table, m.Name)
				}
			}
			fake.RUnlock()
		}
		for _, i := range live {
			home := shardTable(shardFor(types.NamespacedName{Namespace: "ns1", Name: name(i)}, shards))
			chain := svcChain(name(i))
			element := "service-ips: " + fmt.Sprintf("172.30.1.%d", i) + " . tcp . 80 : goto " + chain
			hairpin := fmt.Sprintf("hairpin: 10.180.1.%d . 10.180.1.%d", i, i)
			for _, table := range want {
				st := state{Chains: map[string][]string{}}
				fake.addState(&st, table)
				_, hasChain := st.Chains[chain]
				hasElement, hasHairpin := slices.Contains(st.Elements, element), slices.Contains(st.Elements, hairpin)
				if (table == home) != hasChain || (table == home) != hasElement || (table == home) != hasHairpin {
					t.Errorf("Service %s (shard %s) in table %s: chain %v, element %v, hairpin element %v", name(i), home, table, hasChain, hasElement, hasHairpin)
				}
			}
		}
	}
	var live []int
	for i := range 10 {
		add(i)
		live = append(live, i)
	}
	if res := mustSync(t, p); !res.Full || res.Shards != 3 {
		t.Fatalf("first Sync: %+v, want full with 3 shards", res)
	}
	check(3, live)

	// Growth, one Sync at a time: each writes the new Service and those
	// moving into a new shard, nothing of the others.
	for i := 10; i < 17; i++ {
		before := 0
		if p.shards < shardCount(i+1, 4, p.shards) {
			next := shardCount(i+1, 4, p.shards)
			for _, j := range live {
				if shardFor(types.NamespacedName{Namespace: "ns1", Name: name(j)}, next) != shardFor(types.NamespacedName{Namespace: "ns1", Name: name(j)}, p.shards) {
					before++
				}
			}
		}
		add(i)
		live = append(live, i)
		res := mustSync(t, p)
		if res.Full || res.Services != 1+before {
			t.Errorf("adding %s: %+v, want incremental over %d Services", name(i), res, 1+before)
		}
		check(res.Shards, live)
	}
	if p.shards != 5 {
		t.Fatalf("17 Services of 4 a shard: %d shards, want 5", p.shards)
	}
	// An endpoint change touches its own shard's table only.
	fake.LastTransaction = nil
	p.SetEndpointSlice(slice(name(3), "e", ep{"10.180.1.3", "ready"}, ep{"10.180.2.3", "ready"}))
	mustSync(t, p)
	home := shardTable(shardFor(types.NamespacedName{Namespace: "ns1", Name: name(3)}, 5))
	for _, line := range strings.Split(fake.LastTransaction.String(), "\n") {
		if line != "" && !strings.Contains(line, " ip "+home+" ") {
			t.Errorf("the change of %s (in %s) writes %q", name(3), home, line)
		}
	}

	// Shrinking: down to 2 Services, 1 shard.
	for len(live) > 2 {
		i := live[len(live)-1]
		live = live[:len(live)-1]
		p.DeleteService(types.NamespacedName{Namespace: "ns1", Name: name(i)})
		p.DeleteEndpointSlice(slice(name(i), "e"))
		res := mustSync(t, p)
		if res.Full {
			t.Errorf("deleting %s: a full Sync", name(i))
		}
		check(res.Shards, live)
	}
	if p.shards != 1 {
		t.Fatalf("2 Services: %d shards, want 1", p.shards)
	}

	// A restarted proxy needing fewer shards than are left deletes the rest.
	for i := 20; i < 30; i++ {
		add(i)
		live = append(live, i)
	}
	if res := mustSync(t, p); res.Shards != 3 {
		t.Fatalf("12 Services: %+v, want 3 shards", res)
	}
	p2 := New(fake, Config{ClusterCIDR: cidr, ShardServices: 8})
	for _, i := range live {
		p2.SetService(service(name(i), fmt.Sprintf("172.30.1.%d", i)))
		p2.SetEndpointSlice(slice(name(i), "e", ep{fmt.Sprintf("10.180.1.%d", i), "ready"}))
	}
	if res := mustSync(t, p2); !res.Full || res.Shards != 2 {
		t.Fatalf("restarted: %+v, want full with 2 shards", res)
	}
	p = p2
	check(2, live)
}

// TestTrafficShards is TestTrafficNetlink with one Service a shard: each
// Service is reached through its own table's hooks while the others'
// hooks let it pass, shards come (the table over nft, the Services over
// netlink) and go (over netlink) as Services do.
func TestTrafficShards(t *testing.T) {
	inOwnNetNS(t, "TestTrafficShards", func(t *testing.T) {
		p := traffic(t, Config{ClusterCIDR: cidr, Netlink: true, ShardServices: 1})
		tables := func() int {
			t.Helper()
			out, err := exec.Command("nft", "list", "tables", "ip").CombinedOutput()
			if err != nil {
				t.Fatalf("nft list tables: %v: %s", err, out)
			}
			return strings.Count(string(out), "table ip "+TableName)
		}
		// web deleted: empty and sticky are left, the shards kept (3 for
		// 2 Services is within the slack).
		if got := tables(); got != 3 || p.shards != 3 {
			t.Errorf("%d proxy tables, %d shards, want 3", got, p.shards)
		}
		// sticky deleted too: down to one shard, empty still refused.
		p.DeleteService(types.NamespacedName{Namespace: "ns1", Name: "sticky"})
		if res, err := p.Sync(context.Background()); err != nil || res.Full || res.Shards != 1 {
			t.Fatalf("Sync: %+v, %v; want incremental, 1 shard", res, err)
		}
		if got := tables(); got != 1 {
			t.Errorf("%d proxy tables, want 1", got)
		}
		if _, err := fetch("172.30.0.43:80"); !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("connect to a Service without endpoints: %v, want connection refused", err)
		}
		// web back: 2 shards, answered again.
		web := service("web", "172.30.0.41")
		web.Spec.Ports[0].TargetPort.IntVal = 8080
		p.SetService(web)
		if res, err := p.Sync(context.Background()); err != nil || res.Full || res.Shards != 2 {
			t.Fatalf("Sync: %+v, %v; want incremental, 2 shards", res, err)
		}
		if got, err := fetch("172.30.0.41:80"); err != nil || got != "10.180.0.2:8080" && got != "10.180.0.1:8080" {
			t.Errorf("web after its return: %q, %v", got, err)
		}
		if got := tables(); got != 2 {
			t.Errorf("%d proxy tables, want 2", got)
		}
	})
}
