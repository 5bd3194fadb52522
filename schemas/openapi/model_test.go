package openapi

import (
	"encoding/json"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
)

type embedded struct {
	Shared string `json:"shared,omitempty"`
}

// sample exercises the json tag rules and the special types.
type sample struct {
	metav1.TypeMeta `json:",inline"`
	embedded
	Name     string                      `json:"name"`
	Count    int32                       `json:"count,omitempty"`
	Big      *int64                      `json:"big"`
	Ratio    float64                     `json:"ratio,omitempty"`
	Hidden   string                      `json:"-"`
	Data     []byte                      `json:"data,omitempty"`
	Labels   map[string]string           `json:"labels,omitempty"`
	Blobs    map[string][]byte           `json:"blobs,omitempty"`
	Port     intstr.IntOrString          `json:"port,omitempty"`
	Limit    resource.Quantity           `json:"limit,omitempty"`
	When     metav1.Time                 `json:"when,omitempty"`
	At       *metav1.MicroTime           `json:"at,omitempty"`
	Raw      runtime.RawExtension        `json:"raw,omitempty"`
	Any      any                         `json:"any,omitempty"`
	Env      []corev1.EnvVar             `json:"env,omitempty" patchStrategy:"merge" patchMergeKey:"name"`
	Ref      corev1.LocalObjectReference `json:"ref"`
	Anon     struct{ X string }          `json:"anon,omitempty"`
	unexport string
}

func renderJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestFields(t *testing.T) {
	m := newModels()
	name, err := m.addRoot(reflect.TypeFor[sample](), schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Sample"})
	if err != nil {
		t.Fatal(err)
	}
	if want := "com.github.cairn-dev.cairn.schemas.openapi.sample"; name != want {
		t.Fatalf("name = %q, want %q", name, want)
	}
	s := m.defs[name].Schema
	v3 := renderDefinition(m.defs[name], renderV3)
	props := v3["properties"].(map[string]any)

	tests := []struct {
		field string
		want  string // JSON of the v3 property; "" means absent
	}{
		{"apiVersion", `{"description":"APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources","type":"string"}`},
		{"shared", `{"type":"string"}`},
		{"name", `{"default":"","type":"string"}`},
		{"count", `{"format":"int32","type":"integer"}`},
		{"big", `{"format":"int64","type":"integer"}`},
		{"ratio", `{"format":"double","type":"number"}`},
		{"Hidden", ""},
		{"hidden", ""},
		{"unexport", ""},
		{"data", `{"format":"byte","type":"string"}`},
		{"labels", `{"additionalProperties":{"default":"","type":"string"},"type":"object"}`},
		{"blobs", `{"additionalProperties":{"format":"byte","type":"string"},"type":"object"}`},
		{"port", `{"$ref":"#/components/schemas/io.k8s.apimachinery.pkg.util.intstr.IntOrString"}`},
		{"limit", `{"$ref":"#/components/schemas/io.k8s.apimachinery.pkg.api.resource.Quantity"}`},
		{"when", `{"$ref":"#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.Time"}`},
		{"at", `{"$ref":"#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime"}`},
		{"raw", `{"allOf":[{"$ref":"#/components/schemas/io.k8s.apimachinery.pkg.runtime.RawExtension"}],"default":{}}`},
		{"any", `{"type":"object","x-kubernetes-preserve-unknown-fields":true}`},
		{"env", `{"items":{"allOf":[{"$ref":"#/components/schemas/io.k8s.api.core.v1.EnvVar"}],"default":{}},"type":"array","x-kubernetes-patch-merge-key":"name","x-kubernetes-patch-strategy":"merge"}`},
		{"ref", `{"allOf":[{"$ref":"#/components/schemas/io.k8s.api.core.v1.LocalObjectReference"}],"default":{}}`},
		{"anon", `{"properties":{"X":{"default":"","type":"string"}},"required":["X"],"type":"object"}`},
	}
	for _, tt := range tests {
		t.Run(tt.field, func(t *testing.T) {
			p, ok := props[tt.field]
			if tt.want == "" {
				if ok {
					t.Fatalf("field %s present: %s", tt.field, renderJSON(t, p))
				}
				return
			}
			if !ok {
				t.Fatalf("field %s missing", tt.field)
			}
			if got := renderJSON(t, p); got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
	if got, want := s.Required, []string{"name", "ref"}; !reflect.DeepEqual(got, want) {
		t.Errorf("required = %v, want %v", got, want)
	}
	if got := renderJSON(t, v3["x-kubernetes-group-version-kind"]); got != `[{"group":"example.com","kind":"Sample","version":"v1"}]` {
		t.Errorf("gvk = %s", got)
	}
}

func TestSpecialDefinitions(t *testing.T) {
	m := newModels()
	if _, err := m.addRoot(reflect.TypeFor[sample](), schema.GroupVersionKind{}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		v3, v2 string
	}{
		{"io.k8s.apimachinery.pkg.util.intstr.IntOrString", `{"format":"int-or-string","oneOf":[{"type":"integer"},{"type":"string"}]}`, `{"format":"int-or-string","type":"string"}`},
		{"io.k8s.apimachinery.pkg.api.resource.Quantity", `{"oneOf":[{"type":"string"},{"type":"number"}]}`, `{"type":"string"}`},
		{"io.k8s.apimachinery.pkg.apis.meta.v1.Time", `{"format":"date-time","type":"string"}`, `{"format":"date-time","type":"string"}`},
		{"io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime", `{"format":"date-time","type":"string"}`, `{"format":"date-time","type":"string"}`},
		{"io.k8s.apimachinery.pkg.runtime.RawExtension", `{"type":"object"}`, `{"type":"object"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, ok := m.defs[tt.name]
			if !ok {
				t.Fatal("missing")
			}
			for _, c := range []struct {
				render func(*node) map[string]any
				want   string
			}{{renderV3, tt.v3}, {renderV2, tt.v2}} {
				out := renderDefinition(d, c.render)
				if out["description"] == "" || out["description"] == nil {
					t.Errorf("no description")
				}
				delete(out, "description")
				if got := renderJSON(t, out); got != c.want {
					t.Errorf("got  %s\nwant %s", got, c.want)
				}
			}
		})
	}
}

func TestMergeExtensions(t *testing.T) {
	m := newModels()
	if _, err := m.addRoot(reflect.TypeFor[corev1.Pod](), schema.GroupVersionKind{}); err != nil {
		t.Fatal(err)
	}
	prop := func(def, field string) string {
		p := renderV3(m.defs[def].Schema.Properties[field])
		delete(p, "description")
		delete(p, "items")
		return renderJSON(t, p)
	}
	tests := []struct {
		def, field, want string
	}{
		{"io.k8s.api.core.v1.PodSpec", "containers", `{"type":"array","x-kubernetes-list-map-keys":["name"],"x-kubernetes-list-type":"map","x-kubernetes-patch-merge-key":"name","x-kubernetes-patch-strategy":"merge"}`},
		{"io.k8s.api.core.v1.Container", "ports", `{"type":"array","x-kubernetes-list-map-keys":["containerPort","protocol"],"x-kubernetes-list-type":"map","x-kubernetes-patch-merge-key":"containerPort","x-kubernetes-patch-strategy":"merge"}`},
		{"io.k8s.api.core.v1.Container", "args", `{"type":"array","x-kubernetes-list-type":"atomic"}`},
		{"io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta", "finalizers", `{"type":"array","x-kubernetes-list-type":"set","x-kubernetes-patch-strategy":"merge"}`},
		{"io.k8s.api.core.v1.PodSpec", "volumes", `{"type":"array","x-kubernetes-list-map-keys":["name"],"x-kubernetes-list-type":"map","x-kubernetes-patch-merge-key":"name","x-kubernetes-patch-strategy":"merge,retainKeys"}`},
	}
	for _, tt := range tests {
		t.Run(tt.def+"."+tt.field, func(t *testing.T) {
			if got := prop(tt.def, tt.field); got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
	if got := m.defs["io.k8s.api.core.v1.NodeSelector"].Schema.Ext["x-kubernetes-map-type"]; got != "atomic" {
		t.Errorf("NodeSelector map type = %v, want atomic", got)
	}
}
