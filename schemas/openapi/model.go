package openapi

import (
	"fmt"
	"reflect"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// node is one schema in a format-neutral form; renderV2 and renderV3 turn
// it into OpenAPI v2 and v3 JSON.
type node struct {
	// Ref names a definition; when set, only Description, Default and Ext
	// may accompany it.
	Ref string

	Type        string
	Format      string
	Description string
	// OneOf lists alternative primitive types (v3 only: Quantity,
	// IntOrString). Type is the v2 type for such a node.
	OneOf []string

	Items                *node
	AdditionalProperties *node
	Properties           map[string]*node
	Required             []string
	// PreserveUnknown marks free-form objects (interface-typed fields).
	PreserveUnknown bool

	Default any
	Ext     map[string]any
}

// definition is a named schema and the kinds that use it as their root.
type definition struct {
	Name   string
	goType reflect.Type
	Schema *node
	GVKs   []schema.GroupVersionKind
	// refs are the names of the definitions this one refers to.
	refs []string
}

// models walks Go types and keeps the definitions found, by name.
type models struct {
	defs   map[string]*definition
	byType map[reflect.Type]string
}

func newModels() *models {
	return &models{defs: map[string]*definition{}, byType: map[reflect.Type]string{}}
}

type swaggerDoc interface{ SwaggerDoc() map[string]string }
type modelNamer interface{ OpenAPIModelName() string }
type schemaTyper interface{ OpenAPISchemaType() []string }
type schemaFormatter interface{ OpenAPISchemaFormat() string }
type oneOfTyper interface{ OpenAPIV3OneOfTypes() []string }

// Descriptions for the apimachinery types that carry no SwaggerDoc.
var typeDocs = map[string]string{
	"io.k8s.apimachinery.pkg.apis.meta.v1.Time":       "Time is a wrapper around time.Time which supports correct marshaling to YAML and JSON.  Wrappers are provided for many of the factory methods that the time package offers.",
	"io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime":  "MicroTime is version of Time with microsecond level precision.",
	"io.k8s.apimachinery.pkg.apis.meta.v1.Duration":   "Duration is a wrapper around time.Duration which supports correct marshaling to YAML and JSON.",
	"io.k8s.apimachinery.pkg.api.resource.Quantity":   "Quantity is a fixed-point representation of a number. It provides convenient marshaling/unmarshaling in JSON and YAML, in addition to String() and AsInt64() accessors.\n\nThe serialization format is:\n\n``` <quantity>        ::= <signedNumber><suffix>\n\n\t(Note that <suffix> may be empty, from the \"\" case in <decimalSI>.)\n\n<digit>           ::= 0 | 1 | ... | 9 <digits>          ::= <digit> | <digit><digits> <number>          ::= <digits> | <digits>.<digits> | <digits>. | .<digits> <sign>            ::= \"+\" | \"-\" <signedNumber>    ::= <number> | <sign><number> <suffix>          ::= <binarySI> | <decimalExponent> | <decimalSI> <binarySI>        ::= Ki | Mi | Gi | Ti | Pi | Ei\n\n\t(International System of units; See: http://physics.nist.gov/cuu/Units/binary.html)\n\n<decimalSI>       ::= m | \"\" | k | M | G | T | P | E\n\n\t(Note that 1024 = 1Ki but 1000 = 1k; I didn't choose the capitalization.)\n\n<decimalExponent> ::= \"e\" <signedNumber> | \"E\" <signedNumber> ```\n\nNo matter which of the three exponent forms is used, no quantity may represent a number greater than 2^63-1 in magnitude, nor may it have more than 3 decimal places. Numbers larger or more precise will be capped or rounded up. (E.g.: 0.1m will rounded up to 1m.) This may be extended in the future if we require larger or smaller quantities.",
	"io.k8s.apimachinery.pkg.util.intstr.IntOrString": "IntOrString is a type that can hold an int32 or a string.  When used in JSON or YAML marshalling and unmarshalling, it produces or consumes the inner type.  This allows you to have, for example, a JSON field that can accept a name or number.",
	"io.k8s.apimachinery.pkg.runtime.RawExtension":    "RawExtension is used to hold extensions in external versions.",
}

// definitionName is the name Kubernetes gives the Go type t in OpenAPI:
// io.k8s.api.core.v1.Pod for k8s.io/api/core/v1.Pod.
func definitionName(t reflect.Type) string {
	if n, ok := reflect.Zero(t).Interface().(modelNamer); ok && ownMethod(t, "OpenAPIModelName") {
		return n.OpenAPIModelName()
	}
	pkg := t.PkgPath()
	host, rest, _ := strings.Cut(pkg, "/")
	labels := strings.Split(host, ".")
	for i, j := 0, len(labels)-1; i < j; i, j = i+1, j-1 {
		labels[i], labels[j] = labels[j], labels[i]
	}
	name := strings.Join(labels, ".")
	if rest != "" {
		name += "." + strings.ReplaceAll(rest, "/", ".")
	}
	return name + "." + t.Name()
}

// addRoot registers the definition for Go type t, marking it as the schema
// of gvk (if gvk is not empty), and returns its name.
func (m *models) addRoot(t reflect.Type, gvk schema.GroupVersionKind) (string, error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return "", fmt.Errorf("openapi: kind %s: %s is not a struct", gvk.Kind, t)
	}
	name, err := m.named(t)
	if err != nil {
		return "", err
	}
	if gvk.Kind != "" {
		d := m.defs[name]
		for _, have := range d.GVKs {
			if have == gvk {
				return name, nil
			}
		}
		d.GVKs = append(d.GVKs, gvk)
	}
	return name, nil
}

// named returns the definition name of the named type t, building its
// definition the first time.
func (m *models) named(t reflect.Type) (string, error) {
	if name, ok := m.byType[t]; ok {
		return name, nil
	}
	name := definitionName(t)
	if other, ok := m.defs[name]; ok {
		return "", fmt.Errorf("openapi: types %s and %s both map to definition %s", t, other.goType, name)
	}
	d := &definition{Name: name, goType: t}
	m.byType[t] = name
	m.defs[name] = d

	var refs refSet
	s, err := m.namedSchema(t, &refs)
	if err != nil {
		return "", err
	}
	if s.Description == "" {
		s.Description = typeDocs[name]
	}
	d.Schema = s
	d.refs = refs.sorted()
	return name, nil
}

type refSet map[string]bool

func (r *refSet) add(name string) {
	if *r == nil {
		*r = map[string]bool{}
	}
	(*r)[name] = true
}

func (r refSet) sorted() []string {
	out := make([]string, 0, len(r))
	for n := range r {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// namedSchema is the schema of a definition: special apimachinery types
// first, then structs by their fields.
func (m *models) namedSchema(t reflect.Type, refs *refSet) (*node, error) {
	zero := reflect.Zero(t).Interface()
	if st, ok := zero.(schemaTyper); ok && ownMethod(t, "OpenAPISchemaType") {
		s := &node{}
		if types := st.OpenAPISchemaType(); len(types) > 0 {
			s.Type = types[0]
		}
		if f, ok := zero.(schemaFormatter); ok {
			s.Format = f.OpenAPISchemaFormat()
		}
		if o, ok := zero.(oneOfTyper); ok {
			s.OneOf = o.OpenAPIV3OneOfTypes()
		}
		return s, nil
	}
	if t.Kind() != reflect.Struct {
		return m.inline(t, refs)
	}
	s := &node{Type: "object", Properties: map[string]*node{}}
	mi := mergeInfoOf(definitionName(t))
	if err := m.fields(t, s, refs, mi); err != nil {
		return nil, err
	}
	if d, ok := zero.(swaggerDoc); ok && ownMethod(t, "SwaggerDoc") {
		s.Description = d.SwaggerDoc()[""]
	}
	if mi.atomic() {
		s.ext("x-kubernetes-map-type", "atomic")
	}
	return s, nil
}

// fields adds the JSON fields of struct t to s, following encoding/json's
// rules for embedded structs and tags.
func (m *models) fields(t reflect.Type, s *node, refs *refSet, mi mergeInfo) error {
	var docs map[string]string
	if d, ok := reflect.Zero(t).Interface().(swaggerDoc); ok && ownMethod(t, "SwaggerDoc") {
		docs = d.SwaggerDoc()
	}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		ft := f.Type
		if f.Anonymous && (name == "" || hasOpt(opts, "inline")) {
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				if err := m.fields(ft, s, refs, mi); err != nil {
					return err
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		p, err := m.property(ft, refs)
		if err != nil {
			return fmt.Errorf("%s.%s: %w", t, f.Name, err)
		}
		p.Description = docs[name]
		optional := hasOpt(opts, "omitempty") || hasOpt(opts, "omitzero") || ft.Kind() == reflect.Pointer
		switch {
		case ft.Kind() == reflect.Struct && m.isObject(p.Ref):
			// Kubernetes defaults non-pointer struct fields to {}.
			p.Default = map[string]any{}
		case !optional:
			p.Default = zeroDefault(ft)
		}
		if !optional {
			s.Required = append(s.Required, name)
		}
		if ps := f.Tag.Get("patchStrategy"); ps != "" {
			p.ext("x-kubernetes-patch-strategy", ps)
		}
		if pk := f.Tag.Get("patchMergeKey"); pk != "" {
			p.ext("x-kubernetes-patch-merge-key", pk)
		}
		mi.annotate(name, p)
		s.Properties[name] = p
	}
	return nil
}

// isObject reports whether the definition name is an object schema (a
// definition still being built is a struct, hence an object).
func (m *models) isObject(name string) bool {
	if name == "" {
		return false
	}
	d := m.defs[name]
	return d.Schema == nil || d.Schema.Type == "object"
}

func hasOpt(opts, want string) bool {
	for o := range strings.SplitSeq(opts, ",") {
		if o == want {
			return true
		}
	}
	return false
}

// zeroDefault is the default Kubernetes publishes for a required field of
// type t: the Go zero value of scalars and {} for structs.
func zeroDefault(t reflect.Type) any {
	switch t.Kind() {
	case reflect.String:
		return ""
	case reflect.Bool:
		return false
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return 0
	}
	return nil
}

func (n *node) ext(k string, v any) {
	if n.Ext == nil {
		n.Ext = map[string]any{}
	}
	n.Ext[k] = v
}

// property is the schema of a field of type t: a reference for named
// structs and special types, an inline schema otherwise.
func (m *models) property(t reflect.Type, refs *refSet) (*node, error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if isNamedModel(t) {
		name, err := m.named(t)
		if err != nil {
			return nil, err
		}
		refs.add(name)
		return &node{Ref: name}, nil
	}
	return m.inline(t, refs)
}

// isNamedModel reports whether t gets its own definition: structs from a
// package, and named types that describe their own OpenAPI type.
func isNamedModel(t reflect.Type) bool {
	if t.Name() == "" || t.PkgPath() == "" {
		return false
	}
	if _, ok := reflect.Zero(t).Interface().(schemaTyper); ok && ownMethod(t, "OpenAPISchemaType") {
		return true
	}
	return t.Kind() == reflect.Struct
}

func (m *models) inline(t reflect.Type, refs *refSet) (*node, error) {
	switch t.Kind() {
	case reflect.String:
		return &node{Type: "string"}, nil
	case reflect.Bool:
		return &node{Type: "boolean"}, nil
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Uint8, reflect.Uint16, reflect.Int, reflect.Uint:
		return &node{Type: "integer", Format: "int32"}, nil
	case reflect.Int64, reflect.Uint32, reflect.Uint64:
		return &node{Type: "integer", Format: "int64"}, nil
	case reflect.Float32:
		return &node{Type: "number", Format: "float"}, nil
	case reflect.Float64:
		return &node{Type: "number", Format: "double"}, nil
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return &node{Type: "string", Format: "byte"}, nil
		}
		items, err := m.property(t.Elem(), refs)
		if err != nil {
			return nil, err
		}
		if items.Ref == "" {
			items.Default = zeroDefault(t.Elem())
		} else if t.Elem().Kind() == reflect.Struct && m.isObject(items.Ref) {
			items.Default = map[string]any{}
		}
		return &node{Type: "array", Items: items}, nil
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			return nil, fmt.Errorf("openapi: map key %s is not a string", t.Key())
		}
		vals, err := m.property(t.Elem(), refs)
		if err != nil {
			return nil, err
		}
		if vals.Ref == "" {
			vals.Default = zeroDefault(t.Elem())
		}
		return &node{Type: "object", AdditionalProperties: vals}, nil
	case reflect.Interface:
		return &node{Type: "object", PreserveUnknown: true}, nil
	case reflect.Struct:
		// An anonymous struct: inline its fields.
		s := &node{Type: "object", Properties: map[string]*node{}}
		if err := m.fields(t, s, refs, mergeInfo{}); err != nil {
			return nil, err
		}
		return s, nil
	}
	return nil, fmt.Errorf("openapi: unsupported type %s", t)
}

// ownMethod reports whether the no-argument method name of t is t's own
// rather than promoted from an embedded field (a kind embedding TypeMeta
// must not take TypeMeta's OpenAPIModelName or SwaggerDoc). A method
// giving the same result as an embedded field's is taken as promoted.
func ownMethod(t reflect.Type, name string) bool {
	if _, ok := t.MethodByName(name); !ok {
		return false
	}
	if t.Kind() != reflect.Struct {
		return true
	}
	mine := reflect.Zero(t).MethodByName(name).Call(nil)
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.Anonymous {
			continue
		}
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if _, ok := ft.MethodByName(name); !ok {
			continue
		}
		theirs := reflect.Zero(ft).MethodByName(name).Call(nil)
		if reflect.DeepEqual(valuesOf(mine), valuesOf(theirs)) {
			return false
		}
	}
	return true
}

func valuesOf(vs []reflect.Value) []any {
	out := make([]any, len(vs))
	for i, v := range vs {
		out[i] = v.Interface()
	}
	return out
}

// closure returns the names of the definitions reachable from roots,
// sorted.
func (m *models) closure(roots []string) []string {
	seen := map[string]bool{}
	var walk func(string)
	walk = func(n string) {
		if seen[n] {
			return
		}
		seen[n] = true
		for _, r := range m.defs[n].refs {
			walk(r)
		}
	}
	for _, r := range roots {
		walk(r)
	}
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
