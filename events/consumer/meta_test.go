package consumer

import (
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
)

// TestMeta reads a typed cache through its MetaCache: the same objects,
// indexes and handler calls, with metadata only in sight.
func TestMeta(t *testing.T) {
	env := controlplanetest.Start(t)
	mkNamespace(t, env, "m")
	typed, err := NewCache(CacheConfig[*corev1.ConfigMap]{Resource: configmaps, Namespace: "m", Config: env.Config, JS: env.JS,
		Indexers: map[string]IndexFunc[*corev1.ConfigMap]{"data-a": func(c *corev1.ConfigMap) []string { return []string{c.Data["a"]} }}})
	if err != nil {
		t.Fatal(err)
	}
	meta := Meta(typed)
	var (
		mu    sync.Mutex
		calls []string
	)
	record := func(op string) func(Object, *events.Event) {
		return func(obj Object, ev *events.Event) {
			mu.Lock()
			defer mu.Unlock()
			line := op + " " + KeyOf(obj)
			if op != "DELETE" { // a delete carries the revision of the delete
				line += " " + obj.GetResourceVersion()
			}
			calls = append(calls, line)
		}
	}
	meta.AddHandler(Handler[Object]{OnAdd: record("ADD"), OnUpdate: func(_, obj Object, ev *events.Event) { record("UPDATE")(obj, ev) },
		OnDelete: record("DELETE")})

	first := mustCreate(t, env, cm("m", "first", map[string]string{"a": "1"}))
	run(t, typed)
	if err := meta.WaitForSync(testCtx(t, 30*time.Second)); err != nil {
		t.Fatal(err)
	}
	created := mustCreate(t, env, cm("m", "second", map[string]string{"a": "2"}))
	second := created.DeepCopy()
	second.Data["a"] = "1"
	second = mustUpdate(t, env, second)
	mustDelete(t, env, "m", "first")
	// The delete reaches the log shortly after the write returns.
	eventually(t, 30*time.Second, "the delete to reach the handler", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(calls) >= 4
	})
	if err := meta.WaitForLog(testCtx(t, 30*time.Second)); err != nil {
		t.Fatal(err)
	}

	mu.Lock()
	got := strings.Join(calls, "\n")
	mu.Unlock()
	want := strings.Join([]string{"ADD m/first " + first.ResourceVersion, "ADD m/second " + created.ResourceVersion,
		"UPDATE m/second " + second.ResourceVersion, "DELETE m/first"}, "\n")
	if got != want {
		t.Errorf("handler calls:\n%s\nwant:\n%s", got, want)
	}
	if meta.Resource() != configmaps {
		t.Errorf("Resource() = %v", meta.Resource())
	}
	if obj, ok := meta.Get("m", "second"); !ok || obj.GetResourceVersion() != second.ResourceVersion {
		t.Errorf("Get(second) = %v, %v", obj, ok)
	}
	if obj, ok := meta.Get("m", "first"); ok || obj != nil {
		// A nil *ConfigMap in an Object would be a non-nil interface.
		t.Errorf("Get(deleted) = %#v, %v; want nil, false", obj, ok)
	}
	if l := meta.List(labels.Everything()); len(l) != 1 || l[0].GetName() != "second" {
		t.Errorf("List = %v", l)
	}
	if l := meta.ByIndex("data-a", "1"); len(l) != 1 || l[0].GetName() != "second" {
		t.Errorf("ByIndex(data-a, 1) = %v", l)
	}
	for name, want := range map[string]bool{"data-a": true, IndexNamespace: true, IndexOwner: true, "nope": false} {
		if meta.HasIndex(name) != want {
			t.Errorf("HasIndex(%q) = %v", name, !want)
		}
	}
}
