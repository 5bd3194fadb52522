package discovery

import (
	"sort"

	"github.com/cairn-dev/cairn/schemas"
	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"
)

// Verbs of a served resource, as Kubernetes lists them.
var resourceVerbs = metav1.Verbs{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}

func verbsOf(r *schemas.Resource) metav1.Verbs {
	if r.Verbs != nil {
		return r.Verbs
	}
	return resourceVerbs
}

// Subresource describes a served subresource: the kind it reads and
// writes and the verbs it accepts.
type Subresource struct {
	Name  string
	GVK   schema.GroupVersionKind
	Verbs metav1.Verbs
}

// Subresources returns r's subresources with their kinds and verbs:
// status (and unknown ones) use r's kind with get, patch and update;
// finalize (namespaces) uses r's kind with update only; scale
// is autoscaling/v1 Scale; binding (core/v1 Binding) and eviction
// (policy/v1 Eviction) accept create only.
func Subresources(r *schemas.Resource) []Subresource {
	out := make([]Subresource, 0, len(r.Subresources))
	for _, name := range r.Subresources {
		s := Subresource{Name: name, GVK: r.GVK(), Verbs: metav1.Verbs{"get", "patch", "update"}}
		switch name {
		case "scale":
			s.GVK = schema.GroupVersionKind{Group: "autoscaling", Version: "v1", Kind: "Scale"}
		case "finalize":
			s.Verbs = metav1.Verbs{"update"}
		case "binding":
			s.GVK = schema.GroupVersionKind{Version: "v1", Kind: "Binding"}
			s.Verbs = metav1.Verbs{"create"}
		case "log":
			s.GVK = schema.GroupVersionKind{Version: "v1", Kind: "Pod"}
			s.Verbs = metav1.Verbs{"get"}
		case "exec":
			s.GVK = schema.GroupVersionKind{Version: "v1", Kind: "PodExecOptions"}
			s.Verbs = metav1.Verbs{"create", "get"}
		case "attach":
			s.GVK = schema.GroupVersionKind{Version: "v1", Kind: "PodAttachOptions"}
			s.Verbs = metav1.Verbs{"create", "get"}
		case "portforward":
			s.GVK = schema.GroupVersionKind{Version: "v1", Kind: "PodPortForwardOptions"}
			s.Verbs = metav1.Verbs{"create", "get"}
		case "eviction":
			s.GVK = schema.GroupVersionKind{Group: "policy", Version: "v1", Kind: "Eviction"}
			s.Verbs = metav1.Verbs{"create"}
		}
		out = append(out, s)
	}
	return out
}

// group is one API group and its versions, most preferred first.
type group struct {
	name     string
	versions []string
	// resources by version, in the order given.
	resources map[string][]*schemas.Resource
}

// groupsOf sorts resources into groups: the core group ("") first, then
// the others by name; versions most preferred first (v1 before v1beta1).
func groupsOf(resources []*schemas.Resource) []*group {
	byName := map[string]*group{}
	var groups []*group
	for _, r := range resources {
		g := byName[r.GroupVersion.Group]
		if g == nil {
			g = &group{name: r.GroupVersion.Group, resources: map[string][]*schemas.Resource{}}
			byName[g.name] = g
			groups = append(groups, g)
		}
		v := r.GroupVersion.Version
		if _, ok := g.resources[v]; !ok {
			g.versions = append(g.versions, v)
		}
		g.resources[v] = append(g.resources[v], r)
	}
	sort.Slice(groups, func(i, j int) bool { return groups[i].name < groups[j].name })
	for _, g := range groups {
		sort.Slice(g.versions, func(i, j int) bool {
			return version.CompareKubeAwareVersionStrings(g.versions[i], g.versions[j]) > 0
		})
		for _, rs := range g.resources {
			sort.SliceStable(rs, func(i, j int) bool { return rs[i].Plural < rs[j].Plural })
		}
	}
	return groups
}

func (g *group) apiGroup() metav1.APIGroup {
	out := metav1.APIGroup{
		TypeMeta: metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"},
		Name:     g.name,
	}
	for _, v := range g.versions {
		out.Versions = append(out.Versions, metav1.GroupVersionForDiscovery{
			GroupVersion: schema.GroupVersion{Group: g.name, Version: v}.String(),
			Version:      v,
		})
	}
	out.PreferredVersion = out.Versions[0]
	return out
}

// resourceList is the APIResourceList of one group version.
func resourceList(gv schema.GroupVersion, rs []*schemas.Resource) *metav1.APIResourceList {
	out := &metav1.APIResourceList{
		TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
		GroupVersion: gv.String(),
		APIResources: []metav1.APIResource{},
	}
	for _, r := range rs {
		out.APIResources = append(out.APIResources, metav1.APIResource{
			Name:         r.Plural,
			SingularName: r.Singular,
			Namespaced:   r.Namespaced,
			Kind:         r.Kind,
			Verbs:        verbsOf(r),
			ShortNames:   r.ShortNames,
			Categories:   r.Categories,
		})
		for _, s := range Subresources(r) {
			ar := metav1.APIResource{
				Name:       r.Plural + "/" + s.Name,
				Namespaced: r.Namespaced,
				Kind:       s.GVK.Kind,
				Verbs:      s.Verbs,
			}
			if s.GVK.GroupVersion() != r.GroupVersion {
				ar.Group, ar.Version = s.GVK.Group, s.GVK.Version
			}
			out.APIResources = append(out.APIResources, ar)
		}
	}
	return out
}

// aggregated is the apidiscovery.k8s.io/v2 APIGroupDiscoveryList of
// groups.
func aggregated(groups []*group) *apidiscoveryv2.APIGroupDiscoveryList {
	out := &apidiscoveryv2.APIGroupDiscoveryList{
		TypeMeta: metav1.TypeMeta{Kind: "APIGroupDiscoveryList", APIVersion: apidiscoveryv2.SchemeGroupVersion.String()},
		Items:    []apidiscoveryv2.APIGroupDiscovery{},
	}
	for _, g := range groups {
		gd := apidiscoveryv2.APIGroupDiscovery{ObjectMeta: metav1.ObjectMeta{Name: g.name}}
		for _, v := range g.versions {
			vd := apidiscoveryv2.APIVersionDiscovery{
				Version:   v,
				Freshness: apidiscoveryv2.DiscoveryFreshnessCurrent,
				Resources: []apidiscoveryv2.APIResourceDiscovery{},
			}
			for _, r := range g.resources[v] {
				vd.Resources = append(vd.Resources, resourceDiscovery(r))
			}
			gd.Versions = append(gd.Versions, vd)
		}
		out.Items = append(out.Items, gd)
	}
	return out
}

func resourceDiscovery(r *schemas.Resource) apidiscoveryv2.APIResourceDiscovery {
	scope := apidiscoveryv2.ScopeCluster
	if r.Namespaced {
		scope = apidiscoveryv2.ScopeNamespace
	}
	gvk := r.GVK()
	rd := apidiscoveryv2.APIResourceDiscovery{
		Resource:         r.Plural,
		ResponseKind:     &metav1.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind},
		Scope:            scope,
		SingularResource: r.Singular,
		Verbs:            verbsOf(r),
		ShortNames:       r.ShortNames,
		Categories:       r.Categories,
	}
	for _, s := range Subresources(r) {
		rd.Subresources = append(rd.Subresources, apidiscoveryv2.APISubresourceDiscovery{
			Subresource:  s.Name,
			ResponseKind: &metav1.GroupVersionKind{Group: s.GVK.Group, Version: s.GVK.Version, Kind: s.GVK.Kind},
			Verbs:        s.Verbs,
		})
	}
	return rd
}
