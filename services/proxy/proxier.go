package proxy

import (
	"context"
	"fmt"
	"slices"
	"sort"
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
}

// Proxier keeps the Services and EndpointSlices it is told about and
// programs the cairn-proxy table from them. Its methods are safe for
// concurrent use; Sync calls are serialised.
type Proxier struct {
	nft knftables.Interface
	nl  *netlinkWriter // nil: incremental Syncs through nft too
	cfg Config

	mu       sync.Mutex
	services map[types.NamespacedName]*v1.Service
	// slices by Service, then by slice name.
	slices map[types.NamespacedName]map[string]*discovery.EndpointSlice
	dirty  map[types.NamespacedName]bool

	syncMu sync.Mutex
	// programmed is what the table holds for each Service, as of the
	// last successful Sync. Nil until the first (full) Sync.
	programmed map[types.NamespacedName]*serviceRules
	// counts is what programmed holds, summed over every Service.
	counts Counts
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

// New returns a Proxier that programs nft, which must be an interface on
// the ip family and TableName (knftables.New or knftables.NewFake).
func New(nft knftables.Interface, cfg Config) *Proxier {
	var nl *netlinkWriter
	if cfg.Netlink {
		nl = &netlinkWriter{netns: cfg.NetNS}
	}
	return &Proxier{
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
}

// DeleteService forgets the Service; the next Sync removes its rules.
func (p *Proxier) DeleteService(key types.NamespacedName) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.services, key)
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
	Duration time.Duration
	// Programmed is what the table holds after the Sync.
	Programmed Counts
}

// Sync programs the pending changes in one nftables transaction. The first
// Sync (and every one after a failed Sync) is full: it writes the table's
// base objects, every Service, and removes chains and sets of the table
// that no Service wants, so a restarted proxy takes over the rules its
// predecessor left. Later Syncs rewrite only the Services changed since:
// their own chains, sets and map elements. On error nothing is applied
// and the next Sync is full.
func (p *Proxier) Sync(ctx context.Context) (SyncResult, error) {
	p.syncMu.Lock()
	defer p.syncMu.Unlock()
	start := time.Now()

	p.mu.Lock()
	full := p.programmed == nil
	var keys []types.NamespacedName
	if full {
		for key := range p.services {
			keys = append(keys, key)
		}
	} else {
		for key := range p.dirty {
			keys = append(keys, key)
		}
	}
	clear(p.dirty)
	wanted := make(map[types.NamespacedName]*serviceRules, len(keys))
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
		wanted[key] = buildService(svc, own, p.cfg.ClusterCIDR)
	}
	p.mu.Unlock()

	tx := p.nft.NewTransaction()
	old := p.programmed
	var stale staleObjects
	if full {
		old = map[types.NamespacedName]*serviceRules{}
		var err error
		if stale, err = p.writeBase(ctx, tx, wanted); err != nil {
			p.requeue(keys)
			return SyncResult{}, err
		}
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	var plans []*plan
	for _, key := range keys {
		plans = append(plans, diff(old[key], wanted[key]))
	}
	res := SyncResult{Full: full, Services: len(keys)}
	var err error
	if full || p.nl == nil {
		for _, step := range planSteps {
			for _, pl := range plans {
				step(pl, txWriter{tx})
			}
		}
		stale.remove(tx)
		if res.Ops = tx.NumOperations(); res.Ops > 0 {
			err = p.nft.Run(ctx, tx)
		}
	} else {
		res.Ops, err = p.nl.write(plans)
	}
	if err != nil {
		p.programmed = nil
		p.requeue(keys)
		return SyncResult{}, fmt.Errorf("proxy: sync: %w", err)
	}
	if full {
		p.programmed = map[types.NamespacedName]*serviceRules{}
		p.counts = Counts{}
	}
	for key, r := range wanted {
		p.counts.add(p.programmed[key], -1)
		p.counts.add(r, 1)
		if r == nil {
			delete(p.programmed, key)
		} else {
			p.programmed[key] = r
		}
	}
	res.Duration = time.Since(start)
	res.Programmed = p.counts
	return res, nil
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

// plan is the change of one Service's rules from old to new.
type plan struct {
	old, new *serviceRules
}

func diff(old, new *serviceRules) *plan {
	empty := &serviceRules{}
	if old == nil {
		old = empty
	}
	if new == nil {
		new = empty
	}
	return &plan{old: old, new: new}
}

// tableWriter receives the operations of an incremental Sync: txWriter
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
}

// txWriter writes into a knftables transaction.
type txWriter struct{ tx *knftables.Transaction }

func (w txWriter) deleteElement(e element) {
	w.tx.Delete(&knftables.Element{Map: e.Map, Key: e.Key})
}
func (w txWriter) addSet(s knftables.Set) { w.tx.Add(&s) }
func (w txWriter) writeChain(name string, rules []string) {
	w.tx.Add(&knftables.Chain{Name: name})
	w.tx.Flush(&knftables.Chain{Name: name})
	for _, rule := range rules {
		w.tx.Add(&knftables.Rule{Chain: name, Rule: rule})
	}
}
func (w txWriter) addElement(e element) {
	w.tx.Add(&knftables.Element{Map: e.Map, Key: e.Key, Value: []string{e.Value}})
}
func (w txWriter) flushChain(name string)  { w.tx.Flush(&knftables.Chain{Name: name}) }
func (w txWriter) deleteChain(name string) { w.tx.Delete(&knftables.Chain{Name: name}) }
func (w txWriter) deleteSet(name string)   { w.tx.Delete(&knftables.Set{Name: name}) }

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

// writeChains writes the new and changed chains, endpoint chains first so
// that the service chains' jumps find them.
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
	case len(name) > 8 && name[:8] == "service-":
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
