package schemas

import (
	"slices"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func customRes(group, version, plural, kind string) *Resource {
	return &Resource{GroupVersion: schema.GroupVersion{Group: group, Version: version}, Plural: plural, Kind: kind,
		New: func() Object { return &unstructured.Unstructured{} }, Custom: &Custom{}}
}

func TestSetCustom(t *testing.T) {
	r := NewRegistry()
	builtin := len(r.All())
	changed := r.Changed()
	gen := r.Generation()
	r.SetCustom("ovens.b.example.com", []*Resource{customRes("b.example.com", "v1", "ovens", "Oven")})
	r.SetCustom("kilns.a.example.com", []*Resource{
		customRes("a.example.com", "v1beta1", "kilns", "Kiln"), customRes("a.example.com", "v1", "kilns", "Kiln"),
	})
	// A definition may not take a built-in resource.
	r.SetCustom("pods.core", []*Resource{customRes("", "v1", "pods", "Pod")})
	select {
	case <-changed:
	default:
		t.Error("Changed was not closed")
	}
	if r.Generation() == gen {
		t.Error("Generation did not move")
	}
	var got []string
	for _, res := range r.All()[builtin:] {
		got = append(got, res.GVR().String())
	}
	want := []string{"a.example.com/v1, Resource=kilns", "a.example.com/v1beta1, Resource=kilns", "b.example.com/v1, Resource=ovens"}
	if !slices.Equal(got, want) {
		t.Errorf("custom = %v, want %v", got, want)
	}
	groups := r.Groups()
	if tail := groups[len(groups)-3:]; tail[0].String() != "a.example.com/v1" || tail[1].String() != "a.example.com/v1beta1" || tail[2].String() != "b.example.com/v1" {
		t.Errorf("groups end with %v", tail)
	}
	if res, ok := r.Lookup("", "v1", "pods"); !ok || res.Custom != nil {
		t.Error("a definition replaced pods")
	}
	if _, ok := r.ByKind(schema.GroupVersionKind{Group: "a.example.com", Version: "v1", Kind: "Kiln"}); !ok {
		t.Error("ByKind misses Kiln")
	}
	r.SetCustom("kilns.a.example.com", nil)
	if _, ok := r.Lookup("a.example.com", "v1", "kilns"); ok {
		t.Error("kilns served after removal")
	}
	if len(r.All()) != builtin+1 {
		t.Errorf("%d resources, want %d", len(r.All()), builtin+1)
	}
}

// TestSetCustomConcurrent is for the race detector: lookups while
// definitions come and go.
func TestSetCustomConcurrent(t *testing.T) {
	r := NewRegistry()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for i := range 200 {
			if i%2 == 0 {
				r.SetCustom("kilns.a.example.com", []*Resource{customRes("a.example.com", "v1", "kilns", "Kiln")})
			} else {
				r.SetCustom("kilns.a.example.com", nil)
			}
		}
	}()
	go func() {
		defer wg.Done()
		for range 200 {
			r.Lookup("a.example.com", "v1", "kilns")
			_ = r.All()
			_ = r.Groups()
		}
	}()
	wg.Wait()
}
