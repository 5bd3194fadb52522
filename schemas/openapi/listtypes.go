package openapi

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/applyconfigurations"
	"k8s.io/client-go/kubernetes/scheme"
	smdschema "sigs.k8s.io/structured-merge-diff/v6/schema"
)

// The +listType, +listMapKey and +mapType markers of the k8s.io/api types
// live in comments, out of reach of reflection. client-go ships them as the
// structured-merge-diff schema of the built-in types; that schema is the
// source of x-kubernetes-list-type, x-kubernetes-list-map-keys and
// x-kubernetes-map-type here.
var builtin struct {
	once   sync.Once
	schema *smdschema.Schema
}

// builtinSchema returns client-go's structured-merge-diff schema of the
// built-in types, or nil if it cannot be had.
func builtinSchema() *smdschema.Schema {
	builtin.once.Do(func() {
		tc := applyconfigurations.NewTypeConverter(scheme.Scheme)
		pod := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}}
		tv, err := tc.ObjectToTyped(pod)
		if err != nil {
			return
		}
		builtin.schema = tv.Schema()
	})
	return builtin.schema
}

// mergeInfo is the structured-merge-diff description of one definition.
type mergeInfo struct {
	schema *smdschema.Schema
	fields *smdschema.Map
}

// mergeInfoOf returns the merge description of the definition name; the
// zero mergeInfo (which adds nothing) for types client-go does not know.
func mergeInfoOf(name string) mergeInfo {
	s := builtinSchema()
	if s == nil {
		return mergeInfo{}
	}
	td, ok := s.FindNamedType(name)
	if !ok || td.Map == nil {
		return mergeInfo{}
	}
	return mergeInfo{schema: s, fields: td.Map}
}

// atomic reports whether the definition is an atomic struct or map.
func (mi mergeInfo) atomic() bool {
	return mi.fields != nil && mi.fields.ElementRelationship == smdschema.Atomic
}

// annotate adds the list and map type extensions of field to p.
func (mi mergeInfo) annotate(field string, p *node) {
	if mi.fields == nil {
		return
	}
	f, ok := mi.fields.FindField(field)
	if !ok {
		return
	}
	atom, ok := mi.schema.Resolve(f.Type)
	if !ok {
		return
	}
	switch {
	case atom.List != nil:
		switch atom.List.ElementRelationship {
		case smdschema.Atomic:
			p.ext("x-kubernetes-list-type", "atomic")
		case smdschema.Associative:
			if len(atom.List.Keys) == 0 {
				p.ext("x-kubernetes-list-type", "set")
				break
			}
			p.ext("x-kubernetes-list-type", "map")
			p.ext("x-kubernetes-list-map-keys", append([]string{}, atom.List.Keys...))
		}
	case atom.Map != nil && f.Type.NamedType == nil && atom.Map.ElementRelationship == smdschema.Atomic:
		// Named atomic structs carry the marker on their own definition.
		p.ext("x-kubernetes-map-type", "atomic")
	}
}
