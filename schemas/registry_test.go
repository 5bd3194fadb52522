package schemas

import (
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestRegistryLookup(t *testing.T) {
	r := testRegistry()
	tests := []struct {
		group, version, plural string
		wantKind               string
		namespaced             bool
		short, cats, subs      []string
	}{
		{"", "v1", "namespaces", "Namespace", false, []string{"ns"}, nil, []string{"status", "finalize"}},
		{"", "v1", "pods", "Pod", true, []string{"po"}, []string{"all"}, []string{"status", "binding", "eviction", "log", "exec", "portforward"}},
		{"", "v1", "nodes", "Node", false, []string{"no"}, nil, []string{"status"}},
		{"", "v1", "events", "Event", true, []string{"ev"}, nil, nil},
		{"", "v1", "configmaps", "ConfigMap", true, []string{"cm"}, nil, nil},
		{"", "v1", "secrets", "Secret", true, nil, nil, nil},
		{"apps", "v1", "deployments", "Deployment", true, []string{"deploy"}, []string{"all"}, []string{"status", "scale"}},
		{"apps", "v1", "replicasets", "ReplicaSet", true, []string{"rs"}, []string{"all"}, []string{"status", "scale"}},
		{"coordination.k8s.io", "v1", "leases", "Lease", true, nil, nil, nil},
		{"scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", false, []string{"pc"}, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.plural, func(t *testing.T) {
			res, ok := r.Lookup(tt.group, tt.version, tt.plural)
			if !ok {
				t.Fatal("not found")
			}
			if res.Kind != tt.wantKind || res.Namespaced != tt.namespaced {
				t.Errorf("got %s namespaced=%v", res.Kind, res.Namespaced)
			}
			if !slices.Equal(res.ShortNames, tt.short) || !slices.Equal(res.Categories, tt.cats) || !slices.Equal(res.Subresources, tt.subs) {
				t.Errorf("names: %v %v %v", res.ShortNames, res.Categories, res.Subresources)
			}
			byKind, ok := r.ByKind(res.GVK())
			if !ok || byKind != res {
				t.Errorf("ByKind(%v) = %v, %v", res.GVK(), byKind, ok)
			}
			// New and NewList give the registered Go types.
			gvks, _, err := r.Scheme().ObjectKinds(res.New())
			if err != nil || gvks[0] != res.GVK() {
				t.Errorf("scheme kind of New() = %v, %v", gvks, err)
			}
			listKinds, _, err := r.Scheme().ObjectKinds(res.NewList())
			if err != nil || listKinds[0] != res.GroupVersion.WithKind(res.Kind+"List") {
				t.Errorf("scheme kind of NewList() = %v, %v", listKinds, err)
			}
			for _, f := range []any{res.Default, res.PrepareForCreate, res.PrepareForUpdate, res.ValidateCreate, res.ValidateUpdate, res.Fields, res.Table} {
				if f == nil {
					t.Error("nil strategy func")
				}
			}
			if res.HasSubresource("status") != (res.PrepareForStatusUpdate != nil) {
				t.Error("PrepareForStatusUpdate must be set exactly when status is served")
			}
		})
	}
	if _, ok := r.Lookup("", "v1", "services"); ok {
		t.Error("services are not served")
	}
	if _, ok := r.Lookup("apps", "v1beta1", "deployments"); ok {
		t.Error("apps/v1beta1 is not served")
	}
}

func TestRegistryOrder(t *testing.T) {
	r := testRegistry()
	wantGroups := []schema.GroupVersion{
		{Version: "v1"}, {Group: "apps", Version: "v1"},
		{Group: "scheduling.k8s.io", Version: "v1"}, {Group: "coordination.k8s.io", Version: "v1"},
	}
	if got := r.Groups(); !slices.Equal(got, wantGroups) {
		t.Errorf("Groups() = %v", got)
	}
	var plurals []string
	for _, res := range r.All() {
		plurals = append(plurals, res.Plural)
	}
	want := []string{"configmaps", "events", "namespaces", "nodes", "pods", "secrets", "deployments", "replicasets", "priorityclasses", "leases"}
	if !slices.Equal(plurals, want) {
		t.Errorf("All() = %v", plurals)
	}
	// Registries share nothing.
	a, b := NewRegistry(), NewRegistry()
	ra, _ := a.Lookup("", "v1", "pods")
	rb, _ := b.Lookup("", "v1", "pods")
	if ra == rb {
		t.Error("two registries share a Resource")
	}
}

func TestCodecsRoundTrip(t *testing.T) {
	r := testRegistry()
	d := newDeployment("web")
	d.APIVersion, d.Kind = "apps/v1", "Deployment"
	data, err := runtime.Encode(r.Codecs().LegacyCodec(appsv1.SchemeGroupVersion), d)
	if err != nil {
		t.Fatal(err)
	}
	obj, err := runtime.Decode(r.Codecs().UniversalDeserializer(), data)
	if err != nil {
		t.Fatal(err)
	}
	if got := obj.(*appsv1.Deployment); got.Name != "web" || got.Spec.Selector.MatchLabels["app"] != "web" {
		t.Errorf("decoded %+v", got)
	}
	if _, _, err := r.Scheme().ObjectKinds(&corev1.Binding{}); err != nil {
		t.Errorf("Binding is not in the scheme: %v", err)
	}
}
