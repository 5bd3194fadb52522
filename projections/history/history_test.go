package history_test

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/projections/history/store"
	"github.com/cairn-dev/cairn/services/cairn/clustertest"
)

// waitTimeout bounds each wait for the controllers: generous, for a loaded
// machine.
const waitTimeout = 90 * time.Second

// scenario is what the rollout did, for the checks.
type scenario struct {
	c *clustertest.Cluster
	// writes are the revisions of alice's writes, in order, with the verb.
	writes []write
	// snaps are API snapshots taken after each step, by revision.
	snaps []snapshot
}

type write struct {
	rev  events.Revision
	verb string
}

// snapshot is every object of the rollout's kinds, as the apiserver served
// it at one revision.
type snapshot struct {
	step string
	rev  events.Revision
	objs map[string]map[string]any // resource/name -> object
}

// runScenario creates a 5-replica Deployment, scales it to 3, changes its
// image, rolls back and deletes it, as alice, waiting for the controllers
// after each step; then waits until the projection holds the whole log.
func runScenario(t *testing.T, c *clustertest.Cluster) *scenario {
	s := &scenario{c: c}
	ctx := t.Context()
	dc := c.Alice.AppsV1().Deployments("default")
	d, err := dc.Create(ctx, clustertest.Deployment("web", 5, "busybox:1"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.addWrite(t, d.ResourceVersion, "create")
	s.waitRollout(t, "create", 5, "busybox:1")
	s.update(t, func(d *appsv1.Deployment) { *d.Spec.Replicas = 3 })
	s.waitRollout(t, "scale", 3, "busybox:1")
	s.update(t, func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = "busybox:2" })
	s.waitRollout(t, "image", 3, "busybox:2")
	s.update(t, func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = "busybox:1" })
	s.waitRollout(t, "rollback", 3, "busybox:1")
	bg := metav1.DeletePropagationBackground
	if err := dc.Delete(ctx, "web", metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil {
		t.Fatal(err)
	}
	s.writes = append(s.writes, write{verb: "delete"})
	s.waitGone(t)
	s.catchUp(t)
	return s
}

func (s *scenario) addWrite(t *testing.T, rv, verb string) {
	t.Helper()
	r, err := events.ParseRevision(rv)
	if err != nil {
		t.Fatal(err)
	}
	s.writes = append(s.writes, write{rev: r, verb: verb})
}

// update changes the deployment with fn, retrying conflicts (the
// controllers write its status concurrently).
func (s *scenario) update(t *testing.T, fn func(*appsv1.Deployment)) {
	t.Helper()
	dc := s.c.Alice.AppsV1().Deployments("default")
	for range 20 {
		d, err := dc.Get(t.Context(), "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		fn(d)
		d, err = dc.Update(t.Context(), d, metav1.UpdateOptions{})
		if err == nil {
			s.addWrite(t, d.ResourceVersion, "update")
			return
		}
	}
	t.Fatal("update: too many conflicts")
}

// waitRollout waits until the deployment has n ready pods of image and
// no others, then snapshots the objects.
func (s *scenario) waitRollout(t *testing.T, step string, n int32, image string) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for ; time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		d, err := s.c.Alice.AppsV1().Deployments("default").Get(t.Context(), "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		st := d.Status
		if st.ObservedGeneration < d.Generation || st.UpdatedReplicas != n || st.ReadyReplicas != n ||
			st.Replicas != n || st.AvailableReplicas != n {
			continue
		}
		pods, err := s.c.Alice.CoreV1().Pods("default").List(t.Context(), metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			t.Fatal(err)
		}
		if int32(len(pods.Items)) != n {
			continue
		}
		ok := true
		for _, p := range pods.Items {
			ok = ok && p.Spec.Containers[0].Image == image && p.Status.Phase == corev1.PodRunning
		}
		if ok {
			s.snapshot(t, step)
			return
		}
	}
	t.Fatalf("%s: rollout to %d x %s did not finish in %s", step, n, image, waitTimeout)
}

func (s *scenario) waitGone(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for ; time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		pods, err := s.c.Alice.CoreV1().Pods("default").List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rss, err := s.c.Alice.AppsV1().ReplicaSets("default").List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(pods.Items) == 0 && len(rss.Items) == 0 {
			s.snapshot(t, "delete")
			return
		}
	}
	t.Fatal("delete: pods and replicasets not collected")
}

// catchUp waits until the projection holds every event on the log.
func (s *scenario) catchUp(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	want, err := events.LastPublishedRevision(ctx, s.c.CP.JS)
	if err != nil {
		t.Fatal(err)
	}
	waitStore(t, ctx, s.c.Store, want)
}

func waitStore(t *testing.T, ctx context.Context, st *store.Store, rev events.Revision) {
	t.Helper()
	for {
		ch := st.Changed()
		if p, err := st.Progress(); err == nil && p.Rev >= rev {
			return
		}
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatalf("projection did not reach revision %d", rev)
		}
	}
}

// resources of the snapshots: path prefix and resource name.
var resources = []struct{ path, resource, group string }{
	{"/apis/apps/v1/namespaces/default/deployments", "deployments", "apps"},
	{"/apis/apps/v1/namespaces/default/replicasets", "replicasets", "apps"},
	{"/api/v1/namespaces/default/pods", "pods", ""},
}

// snapshot lists the three kinds at one revision (the pods list's), raw.
func (s *scenario) snapshot(t *testing.T, step string) {
	t.Helper()
	snap := snapshot{step: step, objs: map[string]map[string]any{}}
	rc := s.c.Alice.CoreV1().RESTClient()
	for i, r := range resources {
		req := rc.Get().AbsPath(r.path)
		if i > 0 {
			req = req.Param("resourceVersion", snap.rev.String()).Param("resourceVersionMatch", "Exact")
		}
		raw, err := req.DoRaw(t.Context())
		if err != nil {
			t.Fatalf("snapshot %s: %v", r.resource, err)
		}
		var list struct {
			Metadata struct {
				ResourceVersion string `json:"resourceVersion"`
			} `json:"metadata"`
			Items []map[string]any `json:"items"`
		}
		if err := json.Unmarshal(raw, &list); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			snap.rev, _ = events.ParseRevision(list.Metadata.ResourceVersion)
		}
		for _, o := range list.Items {
			snap.objs[r.resource+"/"+name(o)] = normalize(o)
		}
	}
	s.snaps = append(s.snaps, snap)
}

func name(o map[string]any) string {
	md, _ := o["metadata"].(map[string]any)
	n, _ := md["name"].(string)
	return n
}

// normalize drops what a list item may or may not carry (kind,
// apiVersion), so objects from the API and from the log compare.
func normalize(o map[string]any) map[string]any {
	delete(o, "kind")
	delete(o, "apiVersion")
	return o
}

func decodeObject(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var o map[string]any
	if err := json.Unmarshal(b, &o); err != nil {
		t.Fatal(err)
	}
	return normalize(o)
}

// sameObjects compares two snapshots' objects and reports differences.
func sameObjects(t *testing.T, what string, want, got map[string]map[string]any) {
	t.Helper()
	for k, w := range want {
		g, ok := got[k]
		if !ok {
			t.Errorf("%s: %s missing", what, k)
			continue
		}
		if !reflect.DeepEqual(w, g) {
			wb, _ := json.Marshal(w)
			gb, _ := json.Marshal(g)
			t.Errorf("%s: %s differs:\nwant %s\n got %s", what, k, wb, gb)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s: unexpected %s", what, k)
		}
	}
}

func must[T any](v T, err error) func(t *testing.T) T {
	return func(t *testing.T) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func kubernetesFor(cfg *rest.Config) (*kubernetes.Clientset, error) {
	return kubernetes.NewForConfig(cfg)
}
