package proxy

import (
	"time"

	"sigs.k8s.io/knftables"
)

// baseChain is a chain every table has, hooked or not, with fixed rules.
type baseChain struct {
	name     string
	typ      knftables.BaseChainType
	hook     knftables.BaseChainHook
	priority knftables.BaseChainPriority
	rules    []string
}

// filterPriority is kube-proxy's dstnat-10: just before DNAT, so that a
// Service without endpoints is rejected before anything rewrites its
// address. Numeric, because nft refuses the name dstnat in the input and
// forward hooks.
const filterPriority = knftables.BaseChainPriority("-110")

// baseChains are kube-proxy's nftables-mode chains that do not depend on
// any Service (its cluster-ips check is not built yet).
var baseChains = []baseChain{
	{name: markMasqChain, rules: []string{"mark set mark or " + masqueradeMark}},
	{name: masqueradingChain, rules: []string{
		knftables.Concat("mark and", masqueradeMark, "== 0 return"),
		knftables.Concat("mark set mark xor", masqueradeMark),
		"masquerade fully-random",
	}},
	// kube's reject-chain is a bare reject (ICMP port unreachable). An ICMP
	// error for a connection the node itself opened is not delivered (the
	// reject happens in the output hook), so the client waits for its
	// timeout; a TCP reset refuses it at once, as it does for a pod.
	{name: rejectChain, rules: []string{"meta l4proto tcp reject with tcp reset", "reject"}},
	{name: endpointsCheckChain, rules: []string{
		knftables.Concat("ip daddr . meta l4proto . th dport vmap", "@"+noEndpointServicesMap),
	}},
	{name: nodePortsCheckChain, rules: []string{
		knftables.Concat("fib daddr type local", noLocalhost, "meta l4proto . th dport vmap", "@"+noEndpointNodePortMap),
	}},
	{name: firewallCheckChain, rules: []string{
		knftables.Concat("ip daddr . meta l4proto . th dport vmap", "@"+firewallIPsMap),
	}},
	{name: servicesChain, rules: []string{
		knftables.Concat("ip daddr . meta l4proto . th dport vmap", "@"+serviceIPsMap),
		knftables.Concat("fib daddr type local", noLocalhost, "meta l4proto . th dport vmap", "@"+serviceNodePortsMap),
	}},
	{name: "filter-prerouting", typ: knftables.FilterType, hook: knftables.PreroutingHook, priority: filterPriority, rules: []string{
		"ct state new jump " + firewallCheckChain,
	}},
	{name: "filter-input", typ: knftables.FilterType, hook: knftables.InputHook, priority: filterPriority, rules: []string{
		"ct state new jump " + nodePortsCheckChain,
		"ct state new jump " + endpointsCheckChain,
	}},
	{name: "filter-forward", typ: knftables.FilterType, hook: knftables.ForwardHook, priority: filterPriority, rules: []string{
		"ct state new jump " + endpointsCheckChain,
	}},
	{name: "filter-output", typ: knftables.FilterType, hook: knftables.OutputHook, priority: filterPriority, rules: []string{
		"ct state new jump " + endpointsCheckChain,
		"ct state new jump " + firewallCheckChain,
	}},
	{name: "nat-prerouting", typ: knftables.NATType, hook: knftables.PreroutingHook, priority: knftables.DNATPriority, rules: []string{"jump " + servicesChain}},
	{name: "nat-output", typ: knftables.NATType, hook: knftables.OutputHook, priority: knftables.DNATPriority, rules: []string{"jump " + servicesChain}},
	// Hairpin: a connection DNATed to its own source address (a pod
	// reaching itself through its Service) is masqueraded, or the pod
	// would drop the reply, which comes from its own address. The set
	// holds the addresses of this table's endpoints; a connection to
	// another table's endpoint passes here unmatched (and, unless marked
	// otherwise, not NATed), so the kernel runs the next table's chain.
	{name: "nat-postrouting", typ: knftables.NATType, hook: knftables.PostroutingHook, priority: knftables.SNATPriority, rules: []string{
		knftables.Concat("ct status dnat ip saddr . ip daddr", "@"+hairpinSet, "jump", markMasqChain),
		"jump " + masqueradingChain,
	}},
}

// baseMaps are the verdict maps the Services' elements go into.
var baseMaps = []knftables.Map{
	{Name: serviceIPsMap, Type: "ipv4_addr . inet_proto . inet_service : verdict", Comment: knftables.PtrTo("ClusterIP traffic")},
	{Name: serviceNodePortsMap, Type: "inet_proto . inet_service : verdict", Comment: knftables.PtrTo("NodePort traffic")},
	{Name: noEndpointServicesMap, Type: "ipv4_addr . inet_proto . inet_service : verdict", Comment: knftables.PtrTo("vmap to drop or reject packets to services with no endpoints")},
	{Name: noEndpointNodePortMap, Type: "inet_proto . inet_service : verdict", Comment: knftables.PtrTo("vmap to drop or reject packets to service nodeports with no endpoints")},
	{Name: firewallIPsMap, Type: "ipv4_addr . inet_proto . inet_service : verdict", Comment: knftables.PtrTo("destinations that are subject to LoadBalancerSourceRanges")},
}

// baseSets are the sets whose elements the Services' endpoints make.
var baseSets = []knftables.Set{
	{Name: hairpinSet, Type: "ipv4_addr . ipv4_addr", Comment: knftables.PtrTo("endpoint . endpoint, for hairpin masquerade")},
}

// writeBase adds to tx shard table's table and its fixed objects and
// empties its maps and sets (the full Sync adds every Service's elements again).
// existing is what the table holds now (nil: nothing); its chains and sets
// that are neither fixed nor wanted by one of the shard's Services (rules)
// are returned, for removal at the end of the transaction: what a previous
// proxy left for Services deleted, or homed in another shard, since.
func writeBase(tx *knftables.Transaction, table string, rules []*serviceRules, existing *tableObjects) staleObjects {
	tx.Add(&knftables.Table{Family: knftables.IPv4Family, Name: table, Comment: knftables.PtrTo("rules for cairn proxy")})
	keep := map[string]bool{}
	// Maps and sets first: the fixed chains' rules refer to them.
	for _, m := range baseMaps {
		m.Family, m.Table = knftables.IPv4Family, table
		tx.Add(&m)
		tx.Flush(&m)
		keep[m.Name] = true
	}
	for _, s := range baseSets {
		s.Family, s.Table = knftables.IPv4Family, table
		tx.Add(&s)
		tx.Flush(&s)
		keep[s.Name] = true
	}
	for _, c := range baseChains {
		chain := &knftables.Chain{Family: knftables.IPv4Family, Table: table, Name: c.name}
		if c.typ != "" {
			chain.Type = knftables.PtrTo(c.typ)
			chain.Hook = knftables.PtrTo(c.hook)
			chain.Priority = knftables.PtrTo(c.priority)
		}
		tx.Add(chain)
		tx.Flush(chain)
		keep[c.name] = true
	}
	// Rules after every fixed chain exists: they jump to one another.
	for _, c := range baseChains {
		for _, rule := range c.rules {
			tx.Add(&knftables.Rule{Family: knftables.IPv4Family, Table: table, Chain: c.name, Rule: rule})
		}
	}
	stale := staleObjects{table: table}
	if existing == nil {
		return stale
	}
	for _, r := range rules {
		for name := range r.Chains {
			keep[name] = true
		}
		for name := range r.Sets {
			keep[name] = true
		}
	}
	// Stale chains are emptied and deleted at the end of the transaction,
	// once the Services' chains that jumped to them have been rewritten.
	for _, name := range existing.chains {
		if !keep[name] {
			stale.chains = append(stale.chains, name)
		}
	}
	for _, name := range existing.sets {
		if !keep[name] {
			stale.sets = append(stale.sets, name)
		}
	}
	return stale
}

// staleObjects are the chains and sets of one table no Service wants.
type staleObjects struct {
	table        string
	chains, sets []string
}

func (s staleObjects) remove(tx *knftables.Transaction) {
	w := txWriter{tx: tx, table: s.table}
	for _, name := range s.chains {
		w.flushChain(name)
	}
	for _, name := range s.chains {
		w.deleteChain(name)
	}
	for _, name := range s.sets {
		w.deleteSet(name)
	}
}

func secondsDuration(s int32) time.Duration { return time.Duration(s) * time.Second }
