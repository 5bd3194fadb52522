package history

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/cairn-dev/cairn/events/consumer/consumertest"
	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestHistoryAgainstAPIServer drives every write of History against a real
// control plane and reads the results back through the shared cache.
func TestHistoryAgainstAPIServer(t *testing.T) {
	env := controlplanetest.Start(t)
	m := consumertest.Manager(t, env, controlplanetest.ControllerToken, controlplanetest.Logger("HISTORY_TEST_LOG"), nil)
	revs, err := CacheFor(m)
	if err != nil {
		t.Fatal(err)
	}
	controlplanetest.RunSynced(t, m)
	ctx := context.Background()
	const ns = "hist"
	if _, err := env.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	lbls := map[string]string{"app": "web"}
	ds, err := env.Client.AppsV1().DaemonSets(ns).Create(ctx, &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: lbls},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: lbls},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h := New(m.Client(), revs)
	sel := labels.SelectorFromSet(lbls)
	waitFor := func(what string, cond func([]*appsv1.ControllerRevision) bool) []*appsv1.ControllerRevision {
		t.Helper()
		var got []*appsv1.ControllerRevision
		controlplanetest.Eventually(t, 30*time.Second, what, func() bool {
			got = h.List(ds, sel)
			return cond(got)
		})
		return got
	}

	var collisions int32
	data := raw(`{"spec":{"template":{"metadata":{"labels":{"app":"web"}}}}}`)
	first := NewControllerRevision(ds, dsKind, lbls, data, 1, &collisions)

	// Another revision holds first's name with other data: Create must
	// count a collision and take the next name.
	squatter := first.DeepCopy()
	squatter.OwnerReferences = nil
	squatter.Data = raw(`{"other":true}`)
	if _, err := env.Client.AppsV1().ControllerRevisions(ns).Create(ctx, squatter, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	created, err := h.Create(ctx, ds, first, &collisions)
	if err != nil {
		t.Fatal(err)
	}
	if collisions != 1 || created.Name == first.Name || created.Name != "web-"+HashControllerRevision(first, &collisions) {
		t.Fatalf("after a collision: count %d, name %q (first %q)", collisions, created.Name, first.Name)
	}
	// Creating the same data again returns the existing revision.
	again, err := h.Create(ctx, ds, first, &collisions)
	if err != nil || again.UID != created.UID || collisions != 1 {
		t.Fatalf("re-create: %v, uid %s vs %s, count %d", err, again.UID, created.UID, collisions)
	}
	if _, err := h.Create(ctx, ds, first, nil); !errors.Is(err, ErrNilCollisionCount) {
		t.Fatalf("nil collision count: %v", err)
	}

	// List: the orphan squatter and ds's revision, nothing of others.
	listed := waitFor("both revisions listed", func(l []*appsv1.ControllerRevision) bool { return len(l) == 2 })
	var orphan *appsv1.ControllerRevision
	for _, r := range listed {
		if r.Name == squatter.Name {
			orphan = r
		}
	}
	if orphan == nil {
		t.Fatalf("listed %d revisions without the orphan", len(listed))
	}
	other := parent("other")
	other.UID, other.Namespace = "someone-else", ns
	if got := h.List(other, sel); len(got) != 1 || got[0].Name != squatter.Name {
		t.Fatalf("another parent lists %d revisions, want only the orphan", len(got))
	}

	// Adopt the orphan, then release it.
	adopted, err := h.Adopt(ctx, ds, dsKind, orphan)
	if err != nil {
		t.Fatal(err)
	}
	if ref := metav1.GetControllerOf(adopted); ref == nil || ref.UID != ds.UID {
		t.Fatalf("adopted revision's controller %+v", ref)
	}
	if _, err := h.Adopt(ctx, other, dsKind, adopted); !errors.Is(err, ErrOwned) {
		t.Fatalf("adopting an owned revision: %v", err)
	}
	waitFor("the adopted revision hidden from the other parent", func([]*appsv1.ControllerRevision) bool {
		return len(h.List(other, sel)) == 0
	})
	released, err := h.Release(ctx, ds, adopted)
	if err != nil || released == nil || metav1.GetControllerOf(released) != nil {
		t.Fatalf("release: %v, %+v", err, released)
	}
	// Releasing what ds does not own, or what is gone, is no error.
	if out, err := h.Release(ctx, ds, released); err != nil || out == nil {
		t.Fatalf("release again: %v", err)
	}

	// Update renumbers.
	updated, err := h.Update(ctx, created, 5)
	if err != nil || updated.Revision != 5 {
		t.Fatalf("update: %v, revision %d", err, updated.Revision)
	}
	// A stale copy (old resourceVersion) still updates, on a fresh read.
	updated, err = h.Update(ctx, created, 6)
	if err != nil || updated.Revision != 6 {
		t.Fatalf("update from a stale copy: %v", err)
	}

	// Delete, twice: the second is a no-op.
	for range 2 {
		if err := h.Delete(ctx, released); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := env.Client.AppsV1().ControllerRevisions(ns).Get(ctx, released.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("deleted revision: %v", err)
	}
	got := waitFor("one revision left", func(l []*appsv1.ControllerRevision) bool { return len(l) == 1 && l[0].Revision == 6 })
	if got[0].Name != created.Name {
		t.Fatalf("left %q, want %q", got[0].Name, created.Name)
	}
}
