package proxy

import (
	"context"
	"slices"
	"sort"
	"strings"

	"sigs.k8s.io/knftables"
)

// fakeNFT is an NFT on knftables' Fake, without a default table.
type fakeNFT struct{ *knftables.Fake }

func newFakeNFT() *fakeNFT { return &fakeNFT{knftables.NewFake("", "")} }

func (f *fakeNFT) Tables(context.Context) (map[string]*tableObjects, error) {
	f.RLock()
	defer f.RUnlock()
	out := map[string]*tableObjects{}
	for name, t := range f.Fake.Tables[knftables.IPv4Family] {
		if _, ok := parseShardTable(name); !ok {
			continue
		}
		objs := &tableObjects{}
		for c := range t.Chains {
			objs.chains = append(objs.chains, c)
		}
		for s := range t.Sets {
			objs.sets = append(objs.sets, s)
		}
		out[name] = objs
	}
	return out, nil
}

// tableNames are the proxy's tables in fake, sorted.
func (f *fakeNFT) tableNames() []string {
	tables, _ := f.Tables(context.Background())
	var names []string
	for name := range tables {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// addState adds to st what the Services put in table: chains other than
// the fixed ones, the elements of the fixed maps and sets, the other sets.
func (f *fakeNFT) addState(st *state, table string) {
	f.RLock()
	defer f.RUnlock()
	t := f.Fake.Tables[knftables.IPv4Family][table]
	if t == nil {
		return
	}
	fixed := map[string]bool{}
	for _, c := range baseChains {
		fixed[c.name] = true
	}
	for name, c := range t.Chains {
		if fixed[name] {
			continue
		}
		st.Chains[name] = []string{}
		for _, r := range c.Rules {
			st.Chains[name] = append(st.Chains[name], r.Rule)
		}
	}
	for _, m := range baseMaps {
		fm := t.Maps[m.Name]
		if fm == nil {
			continue
		}
		for _, e := range fm.Elements {
			st.Elements = append(st.Elements, m.Name+": "+strings.Join(e.Key, " . ")+" : "+strings.Join(e.Value, " "))
		}
	}
	for _, s := range baseSets {
		if fs := t.Sets[s.Name]; fs != nil {
			for _, e := range fs.Elements {
				st.Elements = append(st.Elements, s.Name+": "+strings.Join(e.Key, " . "))
			}
		}
	}
	for name := range t.Sets {
		if !slices.ContainsFunc(baseSets, func(s knftables.Set) bool { return s.Name == name }) {
			st.Sets = append(st.Sets, name)
		}
	}
}
