package apitest

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
)

// TestWriteSemantics covers optimistic concurrency, generation,
// generateName, finalizers, delete preconditions, deletecollection and
// dry-run.
func TestWriteSemantics(t *testing.T) {
	env := controlplanetest.Start(t)
	ctx := ctxFor(t, 90*time.Second)
	pods := env.Client.CoreV1().Pods("default")
	deps := env.Client.AppsV1().Deployments("default")
	cms := env.Client.CoreV1().ConfigMaps("default")

	t.Run("optimistic concurrency", func(t *testing.T) {
		cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "occ"}, Data: map[string]string{"v": "0"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		stale := cm.DeepCopy()
		cm.Data["v"] = "1"
		cm, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		stale.Data["v"] = "stale"
		before := settle(t, env)
		if _, err := cms.Update(ctx, stale, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
			t.Fatalf("stale update: got %v, want 409 Conflict", err)
		}
		requireNothingWritten(t, env, before)
		// Without a resourceVersion the update is unconditional.
		stale.ResourceVersion = ""
		got, err := cms.Update(ctx, stale, metav1.UpdateOptions{})
		if err != nil {
			t.Fatalf("update without resourceVersion: %v", err)
		}
		if got.Data["v"] != "stale" || got.ResourceVersion == cm.ResourceVersion {
			t.Errorf("got %v at %s", got.Data, got.ResourceVersion)
		}
		if got.UID != cm.UID || !got.CreationTimestamp.Equal(&cm.CreationTimestamp) {
			t.Errorf("update changed uid or creationTimestamp")
		}
	})

	t.Run("concurrent creates of one name", func(t *testing.T) {
		const n = 8
		errc := make(chan error, n)
		for range n {
			go func() {
				_, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "race"}}, metav1.CreateOptions{})
				errc <- err
			}()
		}
		created := 0
		for range n {
			switch err := <-errc; {
			case err == nil:
				created++
			case !apierrors.IsAlreadyExists(err):
				t.Errorf("got %v, want 409 AlreadyExists", err)
			}
		}
		if created != 1 {
			t.Errorf("%d creates succeeded, want 1", created)
		}
	})

	t.Run("system fields cannot be set by an update", func(t *testing.T) {
		cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "sysfields"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		upd := cm.DeepCopy()
		upd.UID = "forged"
		upd.CreationTimestamp = metav1.NewTime(time.Unix(0, 0))
		got, err := cms.Update(ctx, upd, metav1.UpdateOptions{})
		if err == nil && (got.UID != cm.UID || !got.CreationTimestamp.Equal(&cm.CreationTimestamp)) {
			t.Errorf("update changed uid to %q, creationTimestamp to %v", got.UID, got.CreationTimestamp)
		}
		cur, err := cms.Get(ctx, "sysfields", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if cur.UID != cm.UID {
			t.Errorf("stored uid %q, want %q", cur.UID, cm.UID)
		}
	})

	t.Run("generation", func(t *testing.T) {
		d, err := deps.Create(ctx, testDeployment("gen", 1), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		steps := []struct {
			name    string
			mutate  func(d *appsv1.Deployment) (*appsv1.Deployment, error)
			wantGen int64
		}{
			{"created", func(d *appsv1.Deployment) (*appsv1.Deployment, error) { return d, nil }, 1},
			{"spec change", func(d *appsv1.Deployment) (*appsv1.Deployment, error) {
				d.Spec.Replicas = ptr(int32(3))
				return deps.Update(ctx, d, metav1.UpdateOptions{})
			}, 2},
			{"labels only", func(d *appsv1.Deployment) (*appsv1.Deployment, error) {
				d.Labels = map[string]string{"x": "y"}
				return deps.Update(ctx, d, metav1.UpdateOptions{})
			}, 2},
			{"labels by patch", func(*appsv1.Deployment) (*appsv1.Deployment, error) {
				return deps.Patch(ctx, "gen", types.MergePatchType, []byte(`{"metadata":{"labels":{"x":"z"}}}`), metav1.PatchOptions{})
			}, 2},
			{"status", func(d *appsv1.Deployment) (*appsv1.Deployment, error) {
				d.Status.ObservedGeneration = 2
				d.Status.Replicas = 3
				return deps.UpdateStatus(ctx, d, metav1.UpdateOptions{})
			}, 2},
			{"template by patch", func(*appsv1.Deployment) (*appsv1.Deployment, error) {
				return deps.Patch(ctx, "gen", types.StrategicMergePatchType, []byte(`{"spec":{"template":{"spec":{"containers":[{"name":"c","image":"nginx"}]}}}}`), metav1.PatchOptions{})
			}, 3},
			{"generation set by the client is ignored", func(d *appsv1.Deployment) (*appsv1.Deployment, error) {
				d.Generation = 42
				return deps.Update(ctx, d, metav1.UpdateOptions{})
			}, 3},
			// As in kube, deployment annotations bump the generation:
			// they are copied to the replica sets.
			{"annotations by patch", func(*appsv1.Deployment) (*appsv1.Deployment, error) {
				return deps.Patch(ctx, "gen", types.MergePatchType, []byte(`{"metadata":{"annotations":{"a":"b"}}}`), metav1.PatchOptions{})
			}, 4},
		}
		for _, s := range steps {
			d, err = s.mutate(d)
			if err != nil {
				t.Fatalf("%s: %v", s.name, err)
			}
			if d.Generation != s.wantGen {
				t.Errorf("%s: generation %d, want %d", s.name, d.Generation, s.wantGen)
			}
		}
	})

	t.Run("generateName", func(t *testing.T) {
		seen := map[string]bool{}
		for range 3 {
			p := testPod("")
			p.GenerateName = "gen-"
			got, err := pods.Create(ctx, p, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(got.Name, "gen-") || len(got.Name) != len("gen-")+5 || got.GenerateName != "gen-" {
				t.Errorf("generated name %q", got.Name)
			}
			if seen[got.Name] {
				t.Errorf("name %q generated twice", got.Name)
			}
			seen[got.Name] = true
			if _, err := pods.Get(ctx, got.Name, metav1.GetOptions{}); err != nil {
				t.Errorf("get %s: %v", got.Name, err)
			}
		}
		p := testPod("")
		p.GenerateName = "Bad_"
		if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
			t.Errorf("invalid generateName: got %v, want 422", err)
		}
		p = testPod("")
		if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
			t.Errorf("neither name nor generateName: got %v, want 422", err)
		}
	})

	t.Run("deletion with finalizers", func(t *testing.T) {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "fin", Finalizers: []string{"example.com/keep"}}}
		created, err := cms.Create(ctx, cm, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		w, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: created.ResourceVersion, FieldSelector: "metadata.name=fin"})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		if err := cms.Delete(ctx, "fin", metav1.DeleteOptions{}); err != nil {
			t.Fatalf("delete: %v", err)
		}
		marked, err := cms.Get(ctx, "fin", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("object gone while a finalizer remains: %v", err)
		}
		if marked.DeletionTimestamp == nil {
			t.Fatal("deletionTimestamp not set")
		}
		ev := nextEvent(t, w)
		if ev.Type != watch.Modified || ev.Object.(*corev1.ConfigMap).DeletionTimestamp == nil {
			t.Errorf("got %s, want MODIFIED with deletionTimestamp", ev.Type)
		}
		// A second delete changes nothing.
		before := settle(t, env)
		if err := cms.Delete(ctx, "fin", metav1.DeleteOptions{}); err != nil {
			t.Errorf("second delete: %v", err)
		}
		requireNothingWritten(t, env, before)
		// No new finalizers while being deleted.
		add := marked.DeepCopy()
		add.Finalizers = append(add.Finalizers, "example.com/other")
		if _, err := cms.Update(ctx, add, metav1.UpdateOptions{}); err == nil {
			t.Errorf("added a finalizer to an object being deleted")
		}
		// Other updates are allowed; the object stays.
		upd := marked.DeepCopy()
		upd.Data = map[string]string{"k": "v"}
		if marked, err = cms.Update(ctx, upd, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("update while being deleted: %v", err)
		}
		if ev := nextEvent(t, w); ev.Type != watch.Modified {
			t.Errorf("got %s, want MODIFIED", ev.Type)
		}
		marked.Finalizers = nil
		if _, err := cms.Update(ctx, marked, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("remove finalizers: %v", err)
		}
		if _, err := cms.Get(ctx, "fin", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("after the last finalizer: got %v, want 404", err)
		}
		if ev := nextEvent(t, w); ev.Type != watch.Deleted {
			t.Errorf("got %s, want DELETED", ev.Type)
		}
	})

	t.Run("graceful deletion of a bound pod", func(t *testing.T) {
		p := testPod("graceful")
		p.Spec.NodeName = "n1"
		if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := pods.Delete(ctx, "graceful", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		marked, err := pods.Get(ctx, "graceful", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("bound pod gone before its kubelet confirmed: %v", err)
		}
		if marked.DeletionTimestamp == nil || marked.DeletionGracePeriodSeconds == nil || *marked.DeletionGracePeriodSeconds != 30 {
			t.Fatalf("deletionTimestamp %v, grace %v", marked.DeletionTimestamp, marked.DeletionGracePeriodSeconds)
		}
		// A longer grace period does not extend it.
		before := settle(t, env)
		if err := pods.Delete(ctx, "graceful", metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(60))}); err != nil {
			t.Fatal(err)
		}
		requireNothingWritten(t, env, before)
		// A shorter one shortens it; zero (the kubelet's confirmation, or
		// --force) removes the pod.
		if err := pods.Delete(ctx, "graceful", metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(5))}); err != nil {
			t.Fatal(err)
		}
		if cur, err := pods.Get(ctx, "graceful", metav1.GetOptions{}); err != nil || *cur.DeletionGracePeriodSeconds != 5 {
			t.Errorf("after shortening: %v %v", err, cur.DeletionGracePeriodSeconds)
		}
		if err := pods.Delete(ctx, "graceful", metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))}); err != nil {
			t.Fatalf("delete with grace 0: %v", err)
		}
		if _, err := pods.Get(ctx, "graceful", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("after grace 0: got %v, want 404", err)
		}
	})

	t.Run("delete preconditions", func(t *testing.T) {
		cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "pre"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		bad := []struct {
			name string
			pre  metav1.Preconditions
		}{
			{"uid mismatch", metav1.Preconditions{UID: ptr(types.UID("not-the-uid"))}},
			{"resourceVersion mismatch", metav1.Preconditions{ResourceVersion: ptr("1")}},
		}
		for _, b := range bad {
			before := settle(t, env)
			err := cms.Delete(ctx, "pre", metav1.DeleteOptions{Preconditions: &b.pre})
			if !apierrors.IsConflict(err) {
				t.Errorf("%s: got %v, want 409 Conflict", b.name, err)
			}
			requireNothingWritten(t, env, before)
		}
		err = cms.Delete(ctx, "pre", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &cm.UID, ResourceVersion: &cm.ResourceVersion}})
		if err != nil {
			t.Fatalf("delete with matching preconditions: %v", err)
		}
		if _, err := cms.Get(ctx, "pre", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("got %v, want 404", err)
		}
	})

	t.Run("deletecollection with a label selector", func(t *testing.T) {
		for _, n := range []string{"dc-1", "dc-2", "dc-3", "keep-1", "keep-2"} {
			group := "drop"
			if strings.HasPrefix(n, "keep") {
				group = "keep"
			}
			if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: map[string]string{"group": group}}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		before := settle(t, env)
		if err := cms.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "group=drop"}); err != nil {
			t.Fatal(err)
		}
		l, err := cms.List(ctx, metav1.ListOptions{LabelSelector: "group"})
		if err != nil {
			t.Fatal(err)
		}
		var left []string
		for _, cm := range l.Items {
			left = append(left, cm.Name)
		}
		if !slices.Equal(left, []string{"keep-1", "keep-2"}) {
			t.Errorf("left %v", left)
		}
		var deleted []string
		for _, ev := range eventsSince(t, env, before) {
			if ev.Type != "DELETED" {
				t.Errorf("deletecollection made a %s event", ev.Type)
			}
			deleted = append(deleted, ev.Name)
		}
		if !slices.Equal(deleted, []string{"dc-1", "dc-2", "dc-3"}) {
			t.Errorf("log has deletes of %v", deleted)
		}
	})

	t.Run("dry run writes nothing", func(t *testing.T) {
		if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "dry"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := deps.Create(ctx, testDeployment("dry-scale", 1), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		dry := []string{metav1.DryRunAll}
		steps := []struct {
			name string
			run  func() error
		}{
			{"create", func() error {
				got, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "dry-new"}}, metav1.CreateOptions{DryRun: dry})
				if err == nil && got.Name != "dry-new" {
					t.Errorf("dry-run create returned %q", got.Name)
				}
				return err
			}},
			{"create of a taken name", func() error {
				_, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "dry"}}, metav1.CreateOptions{DryRun: dry})
				if !apierrors.IsAlreadyExists(err) {
					t.Errorf("dry-run create of an existing name: %v, want AlreadyExists", err)
				}
				return nil
			}},
			{"create with generateName", func() error {
				_, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "dry-"}}, metav1.CreateOptions{DryRun: dry})
				return err
			}},
			{"update", func() error {
				got, err := cms.Update(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "dry"}, Data: map[string]string{"a": "b"}}, metav1.UpdateOptions{DryRun: dry})
				if err == nil && got.Data["a"] != "b" {
					t.Errorf("dry-run update returned %v", got.Data)
				}
				return err
			}},
			{"patch", func() error {
				_, err := cms.Patch(ctx, "dry", types.MergePatchType, []byte(`{"data":{"c":"d"}}`), metav1.PatchOptions{DryRun: dry})
				return err
			}},
			{"delete", func() error { return cms.Delete(ctx, "dry", metav1.DeleteOptions{DryRun: dry}) }},
			{"deletecollection", func() error {
				return cms.DeleteCollection(ctx, metav1.DeleteOptions{DryRun: dry}, metav1.ListOptions{})
			}},
			{"scale", func() error {
				_, err := deps.Patch(ctx, "dry-scale", types.MergePatchType, []byte(`{"spec":{"replicas":4}}`), metav1.PatchOptions{DryRun: dry}, "scale")
				return err
			}},
		}
		for _, s := range steps {
			t.Run(s.name, func(t *testing.T) {
				before := settle(t, env)
				if err := s.run(); err != nil {
					t.Fatalf("dry run: %v", err)
				}
				requireNothingWritten(t, env, before)
			})
		}
		if _, err := cms.Get(ctx, "dry-new", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("dry-run create stored the object: %v", err)
		}
		cur, err := cms.Get(ctx, "dry", metav1.GetOptions{})
		if err != nil || len(cur.Data) != 0 {
			t.Errorf("dry-run writes changed the object: %v %v", err, cur)
		}
	})

	t.Run("delete returns the right body", func(t *testing.T) {
		if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "body"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		r := do(t, env, call{method: http.MethodDelete, path: "/api/v1/namespaces/default/configmaps/body"})
		if r.code != http.StatusOK {
			t.Fatalf("got %d: %s", r.code, r.body)
		}
		// kube's success Status for a delete carries no code.
		var st metav1.Status
		if err := json.Unmarshal(r.body, &st); err != nil || st.Kind != "Status" {
			t.Fatalf("not a Status: %s", r.body)
		}
		if st.Status != metav1.StatusSuccess || st.Details == nil || st.Details.Name != "body" {
			t.Errorf("got %s", r.body)
		}
	})
}

func nextEvent(t *testing.T, w watch.Interface) watch.Event {
	t.Helper()
	select {
	case ev, ok := <-w.ResultChan():
		if !ok {
			t.Fatal("watch closed")
		}
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no watch event within 10s")
	}
	return watch.Event{}
}

var _ = context.Background
