package schemas

import (
	"cmp"
	"maps"
	"slices"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"
)

// customSet is the part of a Registry that changes at run time: the
// resources of each CustomResourceDefinition, by its name.
type customSet struct {
	// builtin and builtinGroups count the built-in entries at the head of
	// Registry.all and Registry.groups.
	builtin, builtinGroups int
	byCRD                  map[string][]*Resource
	gen                    uint64
	// changed is closed (and replaced) at every change.
	changed chan struct{}
}

// SetCustom makes resources the ones served for the definition crd (a
// CustomResourceDefinition's name), replacing what it served before; nil
// or empty stops serving them. A resource whose GroupVersionResource or
// GroupVersionKind a built-in kind or another definition already serves is
// left out: built-ins always win. It is safe for concurrent use with every
// other method.
func (r *Registry) SetCustom(crd string, resources []*Resource) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.custom.byCRD == nil {
		r.custom.byCRD = map[string][]*Resource{}
	}
	if len(resources) == 0 {
		if _, ok := r.custom.byCRD[crd]; !ok {
			return
		}
		delete(r.custom.byCRD, crd)
	} else {
		r.custom.byCRD[crd] = slices.Clone(resources)
	}
	r.rebuildLocked()
}

// Custom returns the resources served for the definition crd.
func (r *Registry) Custom(crd string) []*Resource {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return slices.Clone(r.custom.byCRD[crd])
}

// Generation counts the changes SetCustom made; discovery and OpenAPI
// rebuild their documents when it moves.
func (r *Registry) Generation() uint64 {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.custom.gen
}

// Changed returns a channel closed at the next change of the served set.
func (r *Registry) Changed() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.custom.changed == nil {
		r.custom.changed = make(chan struct{})
	}
	return r.custom.changed
}

func (r *Registry) rebuildLocked() {
	all := slices.Clone(r.all[:r.custom.builtin])
	byGVR := map[schema.GroupVersionResource]*Resource{}
	byGVK := map[schema.GroupVersionKind]*Resource{}
	for _, res := range all {
		byGVR[res.GVR()] = res
		byGVK[res.GVK()] = res
	}
	var custom []*Resource
	for _, name := range slices.Sorted(maps.Keys(r.custom.byCRD)) {
		for _, res := range r.custom.byCRD[name] {
			if _, taken := byGVR[res.GVR()]; taken {
				continue
			}
			if _, taken := byGVK[res.GVK()]; taken {
				continue
			}
			byGVR[res.GVR()] = res
			byGVK[res.GVK()] = res
			custom = append(custom, res)
		}
	}
	// Custom groups come after the built-in ones, by name, as kube orders
	// CRD groups (all of the same priority); a group's versions most
	// preferred first, and its resources by plural.
	slices.SortFunc(custom, func(a, b *Resource) int {
		return cmp.Or(cmp.Compare(a.GroupVersion.Group, b.GroupVersion.Group),
			-version.CompareKubeAwareVersionStrings(a.GroupVersion.Version, b.GroupVersion.Version),
			cmp.Compare(a.Plural, b.Plural))
	})
	groups := slices.Clone(r.groups[:r.custom.builtinGroups])
	for _, res := range custom {
		if !slices.Contains(groups, res.GroupVersion) {
			groups = append(groups, res.GroupVersion)
		}
	}
	r.all = append(all, custom...)
	r.byGVR, r.byGVK, r.groups = byGVR, byGVK, groups
	r.custom.gen++
	if r.custom.changed != nil {
		close(r.custom.changed)
		r.custom.changed = nil
	}
}
