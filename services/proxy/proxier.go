package proxy

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/knftables"
)

// Config is what the rules depend on besides Services and EndpointSlices.
type Config struct {
	// ClusterCIDR is the pods' range; traffic to a ClusterIP from outside
	// it is masqueraded (kube-proxy's --cluster-cidr). Empty: no such rule.
	ClusterCIDR string
	// Netlink makes incremental Syncs write their changes over netlink
	// (github.com/google/nftables) into the table in NetNS ("" the
	// process's own namespace), instead of through nft, whose cost grows
	// with the ruleset; full Syncs always go through nft.
	Netlink bool
	NetNS   string
	// ShardServices is how many Services a shard table holds on average
	// (doc.go, Shards); default DefaultShardServices.
	ShardServices int
	// NodeName is the node the proxy runs for: endpoints whose nodeName
	// it is are local (traffic policies Local). Empty: none is.
	NodeName string
}

// Proxier keeps the Services and EndpointSlices it is told about and
// programs the cairn-proxy tables (its shards) from them. Its methods are safe for
// concurrent use; Sync calls are serialised.
type Proxier struct {
	nft NFT
	nl  *netlinkWriter // nil: incremental Syncs through nft too
	cfg Config

	mu       sync.Mutex
	services map[types.NamespacedName]*v1.Service
	// slices by Service, then by slice name.
	slices map[types.NamespacedName]map[string]*discovery.EndpointSlice
	dirty  map[types.NamespacedName]bool
	// withIP are the Services that have rules (hasClusterIP), counted
	// for the number of shards.
	withIP map[types.NamespacedName]bool
	// zone is the node's topology.kubernetes.io/zone label (SetNodeLabels).
	zone string

	syncMu sync.Mutex
	// programmed is what the tables hold for each Service, as of the
	// last successful Sync, and home the shard holding it. Nil until the
	// first (full) Sync.
	programmed map[types.NamespacedName]*serviceRules
	home       map[types.NamespacedName]int
	// shards is the number of shard tables as of the last Sync.
	shards int
	// hairpin is what each shard table's hairpin set holds, counted
	// over the table's Services.
	hairpin hairpinCounts
	// counts is what programmed holds, summed over every Service.
	counts Counts
	// health are the health checks of the Services with
	// externalTrafficPolicy Local, as of the last successful Sync.
	health map[types.NamespacedName]HealthCheck
}

// HealthCheck is what the proxy's health check server answers for one
// Service (kube-proxy's ServiceHealthServer): on its healthCheckNodePort,
// the number of this node's ready endpoints.
type HealthCheck struct {
	Port           int32
	LocalEndpoints int
}

// Counts are the objects the Services put in the table (the fixed chains
// and maps not included).
type Counts struct {
	Chains, Rules, Sets, Elements int
}

func (c *Counts) add(r *serviceRules, sign int) {
	if r == nil {
		return
	}
	c.Chains += sign * len(r.Chains)
	for _, rules := range r.Chains {
		c.Rules += sign * len(rules)
	}
	c.Sets += sign * len(r.Sets)
	c.Elements += sign * len(r.Elements)
}

// New returns a Proxier that programs nft (NewNFT).
func New(nft NFT, cfg Config) *Proxier {
	var nl *netlinkWriter
	if cfg.Netlink {
		nl = &netlinkWriter{netns: cfg.NetNS}
	}
	if cfg.ShardServices <= 0 {
		cfg.ShardServices = DefaultShardServices
	}
	return &Proxier{
		withIP:   map[types.NamespacedName]bool{},
		nl:       nl,
		nft:      nft,
		cfg:      cfg,
		services: map[types.NamespacedName]*v1.Service{},
		slices:   map[types.NamespacedName]map[string]*discovery.EndpointSlice{},
		dirty:    map[types.NamespacedName]bool{},
	}
}

// SetService records svc (added or changed) for the next Sync.
func (p *Proxier) SetService(svc *v1.Service) {
	key := types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.services[key] = svc
	p.dirty[key] = true
	if hasClusterIP(svc) {
		p.withIP[key] = true
	} else {
		delete(p.withIP, key)
	}
}

// SetNodeLabels records the labels of the proxy's node: its zone picks
// the endpoints hinted for it (topology-aware hints). A change of zone
// recomputes every Service at the next Sync (only those whose rules
// change are written). It says whether the zone changed.
func (p *Proxier) SetNodeLabels(labels map[string]string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	zone := labels[v1.LabelTopologyZone]
	if zone == p.zone {
		return false
	}
	p.zone = zone
	for key := range p.services {
		p.dirty[key] = true
	}
	return true
}

// env is what the rules depend on; p.mu is held.
func (p *Proxier) env() Env {
	return Env{ClusterCIDR: p.cfg.ClusterCIDR, NodeName: p.cfg.NodeName, Zone: p.zone}
}

// DeleteService forgets the Service; the next Sync removes its rules.
func (p *Proxier) DeleteService(key types.NamespacedName) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.services, key)
	delete(p.withIP, key)
	p.dirty[key] = true
}

// SetEndpointSlice records slice (added or changed) for the next Sync. A
// slice without the kubernetes.io/service-name label is ignored.
func (p *Proxier) SetEndpointSlice(slice *discovery.EndpointSlice) {
	key, ok := sliceService(slice)
	if !ok {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.slices[key] == nil {
		p.slices[key] = map[string]*discovery.EndpointSlice{}
	}
	p.slices[key][slice.Name] = slice
	p.dirty[key] = true
}

// DeleteEndpointSlice forgets the slice.
func (p *Proxier) DeleteEndpointSlice(slice *discovery.EndpointSlice) {
	key, ok := sliceService(slice)
	if !ok {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.slices[key], slice.Name)
	if len(p.slices[key]) == 0 {
		delete(p.slices, key)
	}
	p.dirty[key] = true
}

func sliceService(slice *discovery.EndpointSlice) (types.NamespacedName, bool) {
	name := slice.Labels[discovery.LabelServiceName]
	return types.NamespacedName{Namespace: slice.Namespace, Name: name}, name != ""
}

// SyncResult says what one Sync did.
type SyncResult struct {
	Full     bool
	Services int // Services whose rules were (re)computed
	Ops      int // operations in the transaction, 0 when nothing changed
	Shards   int // shard tables after the Sync
	Duration time.Duration
	// Programmed is what the tables hold after the Sync.
	Programmed Counts
}

// Sync programs the pending changes in one nftables transaction. The first
// Sync (and every one after a failed Sync) is full: it writes every shard
// table's base objects and every Service, and removes the chains and sets
// no Service wants and the shard tables no longer used, so a restarted
// proxy takes over the rules its predecessor left. Later Syncs rewrite only
// the Services changed since (their own chains, sets and map elements),
// and those whose shard changes when the number of shards does. On error
// nothing is applied and the next Sync is full.
func (p *Proxier) Sync(ctx context.Context) (SyncResult, error) {
	p.syncMu.Lock()
	defer p.syncMu.Unlock()
	start := time.Now()

	p.mu.Lock()
	full := p.programmed == nil
	cur := p.shards
	if full {
		cur = 0
	}
	shards := shardCount(len(p.withIP), p.cfg.ShardServices, cur)
	var keys []types.NamespacedName
	if full {
		for key := range p.services {
			keys = append(keys, key)
		}
	} else {
		for key := range p.dirty {
			keys = append(keys, key)
		}
		if shards != cur {
			// Rehoming: the Services whose shard changes are rewritten.
			for key, home := range p.home {
				if !p.dirty[key] && shardFor(key, shards) != home {
					keys = append(keys, key)
				}
			}
		}
	}
	clear(p.dirty)
	wanted := make(map[types.NamespacedName]*serviceRules, len(keys))
	checks := make(map[types.NamespacedName]*HealthCheck, len(keys))
	for _, key := range keys {
		svc := p.services[key]
		if svc == nil {
			wanted[key] = nil
			continue
		}
		var own []*discovery.EndpointSlice
		for _, s := range p.slices[key] {
			own = append(own, s)
		}
		sort.Slice(own, func(i, j int) bool { return own[i].Name < own[j].Name })
		wanted[key] = buildService(svc, own, p.env())
		checks[key] = healthCheck(svc, own, p.cfg.NodeName)
	}
	p.mu.Unlock()
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })

	old, home := p.programmed, p.home
	if full {
		old, home = nil, nil
	}
	var plans []*plan
	newHome := make(map[types.NamespacedName]int, len(keys))
	for _, key := range keys {
		to := shardFor(key, shards)
		newHome[key] = to
		from, had := home[key]
		switch {
		case had && from == to:
			plans = append(plans, diff(shardTable(to), old[key], wanted[key]))
		default:
			// Homed elsewhere: out of the old shard (unless it goes
			// whole) and into the new one.
			if had && from < shards {
				plans = append(plans, diff(shardTable(from), old[key], nil))
			}
			plans = append(plans, diff(shardTable(to), nil, wanted[key]))
		}
	}

	counts := p.hairpin
	if full {
		counts = hairpinCounts{}
	}
	delta, hairpin := counts.changes(plans)

	res := SyncResult{Full: full, Services: len(keys), Shards: shards}
	var err error
	if full {
		res.Ops, err = p.writeFull(ctx, shards, plans, hairpin, wanted, newHome)
	} else {
		res.Ops, err = p.writeIncremental(ctx, cur, shards, plans, hairpin)
	}
	if err != nil {
		p.programmed = nil
		p.requeue(keys)
		return SyncResult{}, fmt.Errorf("proxy: sync: %w", err)
	}
	if full {
		p.programmed = map[types.NamespacedName]*serviceRules{}
		p.home = map[types.NamespacedName]int{}
		p.counts = Counts{}
		p.health = map[types.NamespacedName]HealthCheck{}
	}
	for key := range wanted {
		if hc := checks[key]; hc != nil {
			p.health[key] = *hc
		} else {
			delete(p.health, key)
		}
	}
	p.shards = shards
	counts.apply(delta)
	for table := range counts {
		if i, _ := parseShardTable(table); i >= shards {
			delete(counts, table)
		}
	}
	p.hairpin = counts
	for key, r := range wanted {
		p.counts.add(p.programmed[key], -1)
		p.counts.add(r, 1)
		if r == nil {
			delete(p.programmed, key)
			delete(p.home, key)
		} else {
			p.programmed[key] = r
			p.home[key] = newHome[key]
		}
	}
	res.Duration = time.Since(start)
	res.Programmed = p.counts
	return res, nil
}

// writeFull writes each shard in an nft transaction of its own: its base
// objects and Services, then the removal of what its table holds that
// nobody wants; then one more deletes the proxy's tables beyond the
// shards. One transaction per table, not one for all: the kernel walks its
// whole transaction list for every anonymous map a rule binds (each
// Service's numgen vmap, __nft_set_trans_bind), so one transaction of all
// Services costs the square of their number (doc.go, Cost). Each table is
// still replaced atomically, and a Service lives in one table. The shards
// go from the last to the first, and the tables beyond them last: a
// Service moving to a new shard (more shards than the predecessor had) is
// in its new table before its old one drops it, and one moving out of a
// table that goes is in its new table before that table is deleted.
func (p *Proxier) writeFull(ctx context.Context, shards int, plans []*plan, hairpin map[string]*setChange, wanted map[types.NamespacedName]*serviceRules, home map[types.NamespacedName]int) (int, error) {
	existing, err := p.nft.Tables(ctx)
	if err != nil {
		return 0, fmt.Errorf("list tables: %w", err)
	}
	byShard := make([][]*serviceRules, shards)
	for key, r := range wanted {
		if r != nil {
			byShard[home[key]] = append(byShard[home[key]], r)
		}
	}
	plansOf := map[string][]*plan{}
	for _, pl := range plans {
		plansOf[pl.table] = append(plansOf[pl.table], pl)
	}
	ops := 0
	for i := shards - 1; i >= 0; i-- {
		table := shardTable(i)
		tx := p.nft.NewTransaction()
		stale := writeBase(tx, table, byShard[i], existing[table])
		writePlans(plansOf[table], map[string]*setChange{table: hairpin[table]}, func(table string) tableWriter { return txWriter{tx: tx, table: table} })
		stale.remove(tx)
		ops += tx.NumOperations()
		if err := p.nft.Run(ctx, tx); err != nil {
			return ops, fmt.Errorf("table %s: %w", table, err)
		}
	}
	var gone []string
	for name := range existing {
		if i, _ := parseShardTable(name); i >= shards {
			gone = append(gone, name)
		}
	}
	if len(gone) == 0 {
		return ops, nil
	}
	sort.Strings(gone)
	tx := p.nft.NewTransaction()
	for _, name := range gone {
		tx.Delete(&knftables.Table{Family: knftables.IPv4Family, Name: name})
	}
	return ops + tx.NumOperations(), p.nft.Run(ctx, tx)
}

// writeIncremental writes the plans, the shard tables that come (cur up
// to shards) and the deletion of those that go (shards up to cur): in one
// nft transaction, or with Netlink in one netlink batch, after a new
// shard's base objects are written through nft.
func (p *Proxier) writeIncremental(ctx context.Context, cur, shards int, plans []*plan, hairpin map[string]*setChange) (int, error) {
	ops := 0
	if p.nl == nil || shards > cur {
		tx := p.nft.NewTransaction()
		for i := cur; i < shards; i++ {
			// Made empty: a table of that name left by a failed Sync is
			// replaced.
			t := &knftables.Table{Family: knftables.IPv4Family, Name: shardTable(i)}
			tx.Add(t)
			tx.Delete(t)
			writeBase(tx, shardTable(i), nil, nil)
		}
		if p.nl == nil {
			writePlans(plans, hairpin, func(table string) tableWriter { return txWriter{tx: tx, table: table} })
			for i := shards; i < cur; i++ {
				tx.Delete(&knftables.Table{Family: knftables.IPv4Family, Name: shardTable(i)})
			}
		}
		if ops = tx.NumOperations(); ops > 0 {
			if err := p.nft.Run(ctx, tx); err != nil {
				return 0, err
			}
		}
		if p.nl == nil {
			return ops, nil
		}
	}
	var gone []string
	for i := shards; i < cur; i++ {
		gone = append(gone, shardTable(i))
	}
	n, err := p.nl.write(plans, hairpin, gone)
	return ops + n, err
}

// HealthChecks returns the health checks of the Services with
// externalTrafficPolicy Local and a healthCheckNodePort, as of the last
// successful Sync.
func (p *Proxier) HealthChecks() map[types.NamespacedName]HealthCheck {
	p.syncMu.Lock()
	defer p.syncMu.Unlock()
	out := make(map[types.NamespacedName]HealthCheck, len(p.health))
	for k, v := range p.health {
		out[k] = v
	}
	return out
}

// healthCheck is svc's health check (nil without one): kube-proxy's
// LocalReadyEndpoints counts this node's ready endpoint addresses over
// the Service's ports, topology aside.
func healthCheck(svc *v1.Service, slices []*discovery.EndpointSlice, nodeName string) *HealthCheck {
	if !hasClusterIP(svc) || svc.Spec.HealthCheckNodePort == 0 || svc.Spec.ExternalTrafficPolicy != v1.ServiceExternalTrafficPolicyLocal {
		return nil
	}
	ips := map[string]bool{}
	for i := range svc.Spec.Ports {
		for _, c := range gatherEndpoints(&svc.Spec.Ports[i], slices, nodeName) {
			if c.local && c.ready {
				ips[c.IP] = true
			}
		}
	}
	return &HealthCheck{Port: svc.Spec.HealthCheckNodePort, LocalEndpoints: len(ips)}
}

// requeue marks keys dirty again after a failed Sync.
func (p *Proxier) requeue(keys []types.NamespacedName) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, key := range keys {
		p.dirty[key] = true
	}
}

// Resync makes the next Sync full, as after a restart.
func (p *Proxier) Resync() {
	p.syncMu.Lock()
	defer p.syncMu.Unlock()
	p.programmed = nil
}

// plan is the change of one Service's rules from old to new in a table.
type plan struct {
	table    string
	old, new *serviceRules
}

func diff(table string, old, new *serviceRules) *plan {
	empty := &serviceRules{}
	if old == nil {
		old = empty
	}
	if new == nil {
		new = empty
	}
	return &plan{table: table, old: old, new: new}
}

// writePlans runs planSteps over the plans, each plan's with the writer of
// its table, then changes the tables' hairpin sets.
func writePlans(plans []*plan, hairpin map[string]*setChange, writer func(table string) tableWriter) {
	for _, step := range planSteps {
		for _, pl := range plans {
			step(pl, writer(pl.table))
		}
	}
	tables := make([]string, 0, len(hairpin))
	for table, ch := range hairpin {
		if ch != nil {
			tables = append(tables, table)
		}
	}
	sort.Strings(tables)
	for _, table := range tables {
		w := writer(table)
		for _, ip := range hairpin[table].del {
			w.deleteSetElement(hairpinSet, []string{ip, ip})
		}
		for _, ip := range hairpin[table].add {
			w.addSetElement(hairpinSet, []string{ip, ip})
		}
	}
}

// hairpinCounts are, for each table, how many of its Services have an
// endpoint at each address: the table's hairpin set holds the addresses
// counted, so an address goes when the last Service using it does.
type hairpinCounts map[string]map[string]int

// hairpinDelta is a change of hairpinCounts.
type hairpinDelta map[string]map[string]int

// setChange is what a Sync deletes from and adds to one table's hairpin
// set: the addresses, sorted.
type setChange struct{ del, add []string }

// changes returns what plans change of c, and the elements to delete and
// add in each table's set; c is left as it is (apply, once written).
func (c hairpinCounts) changes(plans []*plan) (hairpinDelta, map[string]*setChange) {
	delta := hairpinDelta{}
	count := func(table, ip string, n int) {
		if delta[table] == nil {
			delta[table] = map[string]int{}
		}
		delta[table][ip] += n
	}
	for _, pl := range plans {
		for ip := range pl.old.Hairpin {
			if !pl.new.Hairpin[ip] {
				count(pl.table, ip, -1)
			}
		}
		for ip := range pl.new.Hairpin {
			if !pl.old.Hairpin[ip] {
				count(pl.table, ip, 1)
			}
		}
	}
	out := map[string]*setChange{}
	for table, d := range delta {
		ch := &setChange{}
		for ip, n := range d {
			before := c[table][ip]
			switch after := before + n; {
			case before == 0 && after > 0:
				ch.add = append(ch.add, ip)
			case before > 0 && after == 0:
				ch.del = append(ch.del, ip)
			}
		}
		if len(ch.add)+len(ch.del) > 0 {
			sort.Strings(ch.add)
			sort.Strings(ch.del)
			out[table] = ch
		}
	}
	return delta, out
}

func (c hairpinCounts) apply(d hairpinDelta) {
	for table, ips := range d {
		if c[table] == nil {
			c[table] = map[string]int{}
		}
		for ip, n := range ips {
			if c[table][ip] += n; c[table][ip] == 0 {
				delete(c[table], ip)
			}
		}
	}
}

// tableWriter receives the operations of a Sync on one table: txWriter
// puts them into a knftables transaction (nft -f), netlinkWriter into one
// netlink batch.
type tableWriter interface {
	deleteElement(e element)
	addSet(s knftables.Set)
	// writeChain adds the chain if missing, flushes it and adds rules.
	writeChain(name string, rules []string)
	addElement(e element)
	flushChain(name string)
	deleteChain(name string)
	deleteSet(name string)
	// addSetElement and deleteSetElement change a set of addresses.
	addSetElement(set string, key []string)
	deleteSetElement(set string, key []string)
}

// txWriter writes into a knftables transaction, in one table.
type txWriter struct {
	tx    *knftables.Transaction
	table string
}

func (w txWriter) chain(name string) *knftables.Chain {
	return &knftables.Chain{Family: knftables.IPv4Family, Table: w.table, Name: name}
}

func (w txWriter) deleteElement(e element) {
	w.tx.Delete(&knftables.Element{Family: knftables.IPv4Family, Table: w.table, Map: e.Map, Key: e.Key})
}
func (w txWriter) addSet(s knftables.Set) {
	s.Family, s.Table = knftables.IPv4Family, w.table
	w.tx.Add(&s)
}
func (w txWriter) writeChain(name string, rules []string) {
	w.tx.Add(w.chain(name))
	w.tx.Flush(w.chain(name))
	for _, rule := range rules {
		w.tx.Add(&knftables.Rule{Family: knftables.IPv4Family, Table: w.table, Chain: name, Rule: rule})
	}
}
func (w txWriter) addElement(e element) {
	w.tx.Add(&knftables.Element{Family: knftables.IPv4Family, Table: w.table, Map: e.Map, Key: e.Key, Value: []string{e.Value}})
}
func (w txWriter) flushChain(name string)  { w.tx.Flush(w.chain(name)) }
func (w txWriter) deleteChain(name string) { w.tx.Delete(w.chain(name)) }
func (w txWriter) deleteSet(name string) {
	w.tx.Delete(&knftables.Set{Family: knftables.IPv4Family, Table: w.table, Name: name})
}
func (w txWriter) addSetElement(set string, key []string) {
	w.tx.Add(&knftables.Element{Family: knftables.IPv4Family, Table: w.table, Set: set, Key: key})
}
func (w txWriter) deleteSetElement(set string, key []string) {
	w.tx.Delete(&knftables.Element{Family: knftables.IPv4Family, Table: w.table, Set: set, Key: key})
}

// planSteps are the steps of a transaction, each run for every plan before
// the next: elements that go or change are deleted first, then sets and
// chains are written, elements added, and chains no longer wanted flushed
// and, once nothing refers to them, deleted.
var planSteps = []func(*plan, tableWriter){
	(*plan).deleteElements, (*plan).addSets, (*plan).writeChains, (*plan).addElements,
	(*plan).flushStale, (*plan).deleteStale,
}

func (pl *plan) deleteElements(w tableWriter) {
	for id, e := range pl.old.Elements {
		if n, ok := pl.new.Elements[id]; !ok || n.Value != e.Value {
			w.deleteElement(e)
		}
	}
}

func (pl *plan) addSets(w tableWriter) {
	for name, s := range pl.new.Sets {
		if _, ok := pl.old.Sets[name]; !ok {
			w.addSet(s)
		}
	}
}

// writeChains writes the new and changed chains, endpoint chains (session
// affinity's) first so that the service chains' jumps find them.
func (pl *plan) writeChains(w tableWriter) {
	names := make([]string, 0, len(pl.new.Chains))
	for name := range pl.new.Chains {
		names = append(names, name)
	}
	sort.Slice(names, func(i, j int) bool { return chainOrder(names[i]) < chainOrder(names[j]) })
	for _, name := range names {
		rules := pl.new.Chains[name]
		if oldRules, ok := pl.old.Chains[name]; ok && slices.Equal(oldRules, rules) {
			continue
		}
		w.writeChain(name, rules)
	}
}

func chainOrder(name string) string {
	switch {
	case len(name) > 9 && name[:9] == "endpoint-":
		return "0" + name
	case strings.HasPrefix(name, "service-"), strings.HasPrefix(name, "local-"):
		return "1" + name
	}
	return "2" + name
}

func (pl *plan) addElements(w tableWriter) {
	for id, e := range pl.new.Elements {
		if o, ok := pl.old.Elements[id]; !ok || o.Value != e.Value {
			w.addElement(e)
		}
	}
}

// flushStale empties the chains no longer wanted; deleteStale, run after
// every Service's flushStale, deletes them once no rule refers to them.
func (pl *plan) flushStale(w tableWriter) {
	for name := range pl.old.Chains {
		if _, ok := pl.new.Chains[name]; !ok {
			w.flushChain(name)
		}
	}
}

func (pl *plan) deleteStale(w tableWriter) {
	for name := range pl.old.Chains {
		if _, ok := pl.new.Chains[name]; !ok {
			w.deleteChain(name)
		}
	}
	for name := range pl.old.Sets {
		if _, ok := pl.new.Sets[name]; !ok {
			w.deleteSet(name)
		}
	}
}
