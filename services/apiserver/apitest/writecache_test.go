package apitest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/services/apiserver/storage"
	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
)

// TestWriteCacheStale: an update starts from what the apiserver last wrote
// of the object (its write cache); a write it did not make (another
// apiserver's, here one straight to etcd through the store) makes that
// guess stale, and every kind of update must still act on the object as
// it is: a merge patch keeps the other write's change, a PUT with the
// resourceVersion the other write made succeeds, a JSON patch's test
// sees the current value, a patch that changes nothing on the stale copy
// but something on the current one is written, and a patch refused on
// the stale copy succeeds on the current one.
func TestWriteCacheStale(t *testing.T) {
	env := controlplanetest.Start(t)
	ctx := ctxFor(t, time.Minute)
	cms := env.Client.CoreV1().ConfigMaps("default")
	key := storage.Key("", "configmaps", "default", "guess")
	// behind writes data[k]=v to etcd as another apiserver would.
	behind := func(k, v string) string {
		t.Helper()
		kv, err := env.Store.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		var cm corev1.ConfigMap
		if err := json.Unmarshal(kv.Value, &cm); err != nil {
			t.Fatal(err)
		}
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		cm.Data[k] = v
		val, err := json.Marshal(&cm)
		if err != nil {
			t.Fatal(err)
		}
		meta := &events.WriteMeta{ID: ulid.Make().String(), Verb: "update", Time: time.Now(), Key: key,
			Actor: events.Actor{User: "another-apiserver", Groups: []string{"system:masters", "system:authenticated"}}}
		rev, _, err := env.Store.Update(ctx, key, val, kv.Revision, meta)
		if err != nil {
			t.Fatal(err)
		}
		return rev.String()
	}
	patch := func(pt types.PatchType, body string) (*corev1.ConfigMap, error) {
		return cms.Patch(ctx, "guess", pt, []byte(body), metav1.PatchOptions{})
	}

	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "guess"}, Data: map[string]string{"a": "1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	behind("b", "2")
	got, err := patch(types.MergePatchType, `{"data":{"c":"3"}}`)
	if err != nil || got.Data["a"] != "1" || got.Data["b"] != "2" || got.Data["c"] != "3" {
		t.Fatalf("merge patch after another server's write: %v, %v; want a=1 b=2 c=3", got.Data, err)
	}

	rv := behind("d", "4")
	upd := got.DeepCopy()
	upd.ResourceVersion = rv
	upd.Data = map[string]string{"e": "5"}
	if got, err = cms.Update(ctx, upd, metav1.UpdateOptions{}); err != nil || got.Data["e"] != "5" {
		t.Fatalf("PUT with the resourceVersion another server wrote (%s): %v, %v", rv, got, err)
	}
	stale := got.DeepCopy()
	stale.Data = map[string]string{"f": "6"}
	if _, err := cms.Update(ctx, stale, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("PUT with the current resourceVersion: %v", err)
	}
	behind("g", "7")
	if _, err := cms.Update(ctx, stale, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Fatalf("PUT with a resourceVersion older than another server's write: %v, want 409", err)
	}

	behind("h", "8")
	if got, err = patch(types.JSONPatchType, `[{"op":"test","path":"/data/h","value":"8"},{"op":"add","path":"/data/i","value":"9"}]`); err != nil || got.Data["i"] != "9" {
		t.Fatalf("JSON patch testing another server's write: %v, %v", got, err)
	}

	// The cache holds i=9; etcd gets i=x; a patch to i=9 is a change.
	behind("i", "x")
	before, err := cms.Get(ctx, "guess", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, err = patch(types.MergePatchType, `{"data":{"i":"9"}}`); err != nil || got.Data["i"] != "9" || got.ResourceVersion == before.ResourceVersion {
		t.Fatalf("patch back to the cached value: %v (rv %s, before %s), %v; want i=9 written", got.Data, got.ResourceVersion, before.ResourceVersion, err)
	}
	if now, err := cms.Get(ctx, "guess", metav1.GetOptions{}); err != nil || now.Data["i"] != "9" {
		t.Fatalf("after the patch back: %v, %v", now, err)
	}

	// A test op that fails on the cached copy and holds on etcd's.
	behind("j", "10")
	if _, err := patch(types.JSONPatchType, `[{"op":"test","path":"/data/j","value":"10"}]`); err != nil {
		t.Fatalf("JSON patch whose test holds only on the current object: %v", err)
	}
	if _, err := patch(types.JSONPatchType, `[{"op":"test","path":"/data/j","value":"11"}]`); err == nil {
		t.Fatal("JSON patch whose test fails on the current object succeeded")
	}
}
