package deployment

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/events/consumer"
	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
)

// TestDeployment runs every scenario on one control plane, each in its own
// namespace, with the deployment controller, a ReplicaSet controller and a
// kubelet stand-in.
func TestDeployment(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	w := startWorld(t)
	t.Run("create", func(t *testing.T) { t.Parallel(); testCreate(t, w) })
	t.Run("scale", func(t *testing.T) { t.Parallel(); testScale(t, w) })
	t.Run("rolling", func(t *testing.T) { t.Parallel(); testRolling(t, w) })
	t.Run("recreate", func(t *testing.T) { t.Parallel(); testRecreate(t, w) })
	t.Run("deadline", func(t *testing.T) { t.Parallel(); testDeadline(t, w) })
	t.Run("undo", func(t *testing.T) { t.Parallel(); testUndo(t, w) })
	t.Run("pause", func(t *testing.T) { t.Parallel(); testPause(t, w) })
	t.Run("history", func(t *testing.T) { t.Parallel(); testHistory(t, w) })
	t.Run("adopt", func(t *testing.T) { t.Parallel(); testAdopt(t, w) })
}

func testCreate(t *testing.T, w *world) {
	ns := w.namespace(t, "create")
	d := newDeployment(ns, "web", 3, "nginx:1")
	d.Spec.MinReadySeconds = 1
	w.create(t, d)
	d = w.complete(t, ns, "web")

	rss := w.replicaSets(t, ns)
	if len(rss) != 1 {
		t.Fatalf("%d replica sets, want 1", len(rss))
	}
	rs := rss[0]
	hash := ComputeHash(&d.Spec.Template, nil)
	checks := []struct {
		what, got, want string
	}{
		{"name", rs.Name, "web-" + hash},
		{"label", rs.Labels[appsv1.DefaultDeploymentUniqueLabelKey], hash},
		{"template label", rs.Spec.Template.Labels[appsv1.DefaultDeploymentUniqueLabelKey], hash},
		{"selector", rs.Spec.Selector.MatchLabels[appsv1.DefaultDeploymentUniqueLabelKey], hash},
		{"rs revision", rs.Annotations[RevisionAnnotation], "1"},
		{"deployment revision", d.Annotations[RevisionAnnotation], "1"},
		{"desired-replicas", rs.Annotations[DesiredReplicasAnnotation], "3"},
		{"max-replicas", rs.Annotations[MaxReplicasAnnotation], "4"}, // 3 + 25% rounded up
		{"minReadySeconds", strconv.Itoa(int(rs.Spec.MinReadySeconds)), "1"},
		{"owner", metav1.GetControllerOf(&rs).Name, "web"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q", c.what, c.got, c.want)
		}
	}
	st := d.Status
	if st.Replicas != 3 || st.UpdatedReplicas != 3 || st.ReadyReplicas != 3 || st.AvailableReplicas != 3 ||
		st.UnavailableReplicas != 0 || st.ObservedGeneration != d.Generation {
		t.Errorf("status: %s", describe(d))
	}
	if c := getCondition(st, appsv1.DeploymentAvailable); c == nil || c.Status != corev1.ConditionTrue || c.Reason != ReasonMinimumAvailable {
		t.Errorf("Available condition: %+v", c)
	}
	if c := getCondition(st, appsv1.DeploymentProgressing); c == nil || c.Status != corev1.ConditionTrue || c.Reason != ReasonNewRSAvailable {
		t.Errorf("Progressing condition: %+v", c)
	}
	if out, err := kubectl(t, w, "-n", ns, "rollout", "status", "deployment/web", "--timeout=20s"); err != nil {
		t.Errorf("kubectl rollout status: %v\n%s", err, out)
	}
}

func testScale(t *testing.T, w *world) {
	ns := w.namespace(t, "scale")
	w.create(t, newDeployment(ns, "web", 2, "nginx:1"))
	w.complete(t, ns, "web")
	for _, n := range []int32{5, 1, 0, 3} {
		w.update(t, ns, "web", func(d *appsv1.Deployment) { d.Spec.Replicas = &n })
		d := w.complete(t, ns, "web")
		rss := w.replicaSets(t, ns)
		if len(rss) != 1 || *rss[0].Spec.Replicas != n || rss[0].Annotations[DesiredReplicasAnnotation] != strconv.Itoa(int(n)) {
			t.Fatalf("scale to %d: replica sets %+v", n, rss)
		}
		if got := len(w.pods(t, ns)); got != int(n) {
			t.Errorf("scale to %d: %d pods", n, got)
		}
		if d.Annotations[RevisionAnnotation] != "1" {
			t.Errorf("scaling changed the revision: %s", describe(d))
		}
	}

	// Every change of size is a ScalingReplicaSet Event on the
	// deployment, as kube's, which kubectl describe lists.
	rs := w.replicaSets(t, ns)[0].Name
	want := []string{
		"Scaled up replica set " + rs + " from 0 to 2",
		"Scaled up replica set " + rs + " from 2 to 5",
		"Scaled down replica set " + rs + " from 5 to 1",
		"Scaled down replica set " + rs + " from 1 to 0",
		"Scaled up replica set " + rs + " from 0 to 3",
	}
	var got []string
	controlplanetest.Eventually(t, wait, "five ScalingReplicaSet events", func() bool {
		got = got[:0]
		for _, ev := range controlplanetest.ListEvents(t, w.env, ns, "web", ReasonScalingReplicaSet) {
			if ev.Source.Component != Component || ev.InvolvedObject.Kind != "Deployment" || ev.Type != corev1.EventTypeNormal {
				t.Fatalf("event %+v, want a Normal one from %s about the Deployment", ev, Component)
			}
			got = append(got, ev.Message)
		}
		return len(got) >= len(want)
	})
	slices.Sort(got)
	if want := slices.Sorted(slices.Values(want)); !slices.Equal(got, want) {
		t.Errorf("ScalingReplicaSet events say %q, want %q", got, want)
	}
	out, err := kubectl(t, w, "-n", ns, "describe", "deployment", "web")
	if err != nil || !strings.Contains(out, "ScalingReplicaSet") || !strings.Contains(out, "Scaled up replica set "+rs+" from 0 to 3") {
		t.Errorf("kubectl describe deployment (%v) does not list the scaling events:\n%s", err, out)
	}
}

// testRolling rolls a deployment of 4 replicas from one image to another
// with several maxSurge/maxUnavailable pairs and checks, at every change
// of the namespace's pods, that there are at most replicas+maxSurge pods and
// at least replicas-maxUnavailable ready ones.
func testRolling(t *testing.T, w *world) {
	cases := []struct {
		name               string
		surge, unavailable string
		wantSurge, wantMU  int
	}{
		{"surge1-unavail0", "1", "0", 1, 0},
		{"surge0-unavail1", "0", "1", 0, 1},
		{"surge1-unavail1", "1", "1", 1, 1},
		{"surge25-unavail25", "25%", "25%", 1, 1},
		{"surge0-unavail25", "0", "25%", 0, 1},
		{"surge25-unavail0", "25%", "0", 1, 0},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ns := w.namespace(t, fmt.Sprintf("rolling-%d", i))
			const replicas = 4
			d := newDeployment(ns, "web", replicas, "nginx:1")
			d.Spec.Strategy = rollingStrategy(tc.surge, tc.unavailable)
			w.create(t, d)
			w.complete(t, ns, "web")

			watch := watchPods(t, w, ns, replicas+tc.wantSurge, replicas-tc.wantMU)
			w.update(t, ns, "web", func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = "nginx:2" })
			d = w.complete(t, ns, "web")
			watch.stop(t)

			rss := w.replicaSets(t, ns)
			if len(rss) != 2 || *rss[0].Spec.Replicas != 0 || *rss[1].Spec.Replicas != replicas ||
				rss[1].Annotations[RevisionAnnotation] != "2" || d.Annotations[RevisionAnnotation] != "2" {
				t.Fatalf("after the rollout: %s, replica sets %v", describe(d), summary(rss))
			}
			for _, p := range w.pods(t, ns) {
				if p.Spec.Containers[0].Image != "nginx:2" {
					t.Errorf("old pod %s left", p.Name)
				}
			}
			t.Logf("observed at most %d pods, at least %d ready", watch.maxPods, watch.minReady)
		})
	}
}

func testRecreate(t *testing.T, w *world) {
	ns := w.namespace(t, "recreate")
	d := newDeployment(ns, "web", 3, "nginx:1")
	d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
	w.create(t, d)
	w.complete(t, ns, "web")

	// At no moment may old and new pods exist together.
	var mu sync.Mutex
	var mixed []string
	watch := watchPodsWith(t, w, ns, &podWatch{}, func(pods []*corev1.Pod) {
		images := map[string]int{}
		for _, p := range pods {
			images[p.Spec.Containers[0].Image]++
		}
		if images["nginx:1"] > 0 && images["nginx:2"] > 0 {
			mu.Lock()
			mixed = append(mixed, fmt.Sprint(images))
			mu.Unlock()
		}
	})
	w.update(t, ns, "web", func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = "nginx:2" })
	d = w.complete(t, ns, "web")
	watch.stop(t)
	mu.Lock()
	defer mu.Unlock()
	if len(mixed) > 0 {
		t.Errorf("old and new pods together: %v", mixed)
	}
	if d.Annotations[RevisionAnnotation] != "2" {
		t.Errorf("after recreate: %s", describe(d))
	}
}

func testDeadline(t *testing.T, w *world) {
	ns := w.namespace(t, "deadline")
	d := newDeployment(ns, "web", 2, "nginx:1")
	d.Spec.ProgressDeadlineSeconds = ptr[int32](3)
	w.create(t, d)
	w.complete(t, ns, "web")
	w.update(t, ns, "web", func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = "broken:1" })
	eventually(t, wait, "ProgressDeadlineExceeded", func() bool {
		d = w.get(t, ns, "web")
		c := getCondition(d.Status, appsv1.DeploymentProgressing)
		return c != nil && c.Status == corev1.ConditionFalse && c.Reason == ReasonTimedOut
	})
	// The old pods stay: maxUnavailable 25% of 2 rounds down to 0.
	if d.Status.AvailableReplicas != 2 {
		t.Errorf("a stuck rollout took available pods away: %s", describe(d))
	}
	if out, err := kubectl(t, w, "-n", ns, "rollout", "status", "deployment/web", "--timeout=20s"); err == nil {
		t.Errorf("kubectl rollout status succeeded on a timed out rollout:\n%s", out)
	}
}

func testUndo(t *testing.T, w *world) {
	ns := w.namespace(t, "undo")
	w.create(t, newDeployment(ns, "web", 3, "nginx:1"))
	w.complete(t, ns, "web")
	first := w.replicaSets(t, ns)[0]
	w.update(t, ns, "web", func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = "nginx:2" })
	w.complete(t, ns, "web")

	if _, err := exec.LookPath("kubectl"); err == nil {
		if out, err := kubectl(t, w, "-n", ns, "rollout", "undo", "deployment/web", "--to-revision=1"); err != nil {
			t.Fatalf("kubectl rollout undo: %v\n%s", err, out)
		}
	} else {
		// What kubectl does: the old template, without its hash label.
		w.update(t, ns, "web", func(d *appsv1.Deployment) {
			d.Spec.Template = *first.Spec.Template.DeepCopy()
			delete(d.Spec.Template.Labels, appsv1.DefaultDeploymentUniqueLabelKey)
		})
	}
	d := w.complete(t, ns, "web")
	rss := w.replicaSets(t, ns)
	if len(rss) != 2 {
		t.Fatalf("undo made a new replica set: %v", summary(rss))
	}
	back := rss[1]
	if back.UID != first.UID || *back.Spec.Replicas != 3 || back.Annotations[RevisionAnnotation] != "3" ||
		back.Annotations[RevisionHistoryAnnotation] != "1" || d.Annotations[RevisionAnnotation] != "3" {
		t.Errorf("after undo: %s, replica sets %v (want %s back at revision 3)", describe(d), summary(rss), first.Name)
	}
	if *rss[0].Spec.Replicas != 0 {
		t.Errorf("revision 2 not scaled down: %v", summary(rss))
	}
}

func testPause(t *testing.T, w *world) {
	ns := w.namespace(t, "pause")
	w.create(t, newDeployment(ns, "web", 2, "nginx:1"))
	w.complete(t, ns, "web")
	w.update(t, ns, "web", func(d *appsv1.Deployment) { d.Spec.Paused = true })
	d := w.update(t, ns, "web", func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = "nginx:2" })
	gen := d.Generation
	eventually(t, wait, "the paused deployment to be observed", func() bool {
		d = w.get(t, ns, "web")
		c := getCondition(d.Status, appsv1.DeploymentProgressing)
		return d.Status.ObservedGeneration >= gen && c != nil && c.Reason == ReasonPaused
	})
	// Scaling works while paused, a rollout does not.
	w.update(t, ns, "web", func(d *appsv1.Deployment) { d.Spec.Replicas = ptr[int32](3) })
	eventually(t, wait, "the paused deployment to scale", func() bool {
		rss := w.replicaSets(t, ns)
		return len(rss) == 1 && *rss[0].Spec.Replicas == 3 && rss[0].Status.AvailableReplicas == 3
	})
	if rss := w.replicaSets(t, ns); len(rss) != 1 || rss[0].Spec.Template.Spec.Containers[0].Image != "nginx:1" {
		t.Fatalf("paused deployment rolled out: %v", summary(rss))
	}
	w.update(t, ns, "web", func(d *appsv1.Deployment) { d.Spec.Paused = false })
	d = w.complete(t, ns, "web")
	rss := w.replicaSets(t, ns)
	if len(rss) != 2 || rss[1].Spec.Template.Spec.Containers[0].Image != "nginx:2" || d.Annotations[RevisionAnnotation] != "2" {
		t.Errorf("after resume: %s, %v", describe(d), summary(rss))
	}
}

func testHistory(t *testing.T, w *world) {
	ns := w.namespace(t, "history")
	d := newDeployment(ns, "web", 1, "nginx:1")
	d.Spec.RevisionHistoryLimit = ptr[int32](1)
	w.create(t, d)
	w.complete(t, ns, "web")
	for _, image := range []string{"nginx:2", "nginx:3", "nginx:4"} {
		w.update(t, ns, "web", func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = image })
		w.complete(t, ns, "web")
	}
	eventually(t, wait, "old replica sets beyond the limit to go", func() bool { return len(w.replicaSets(t, ns)) == 2 })
	rss := w.replicaSets(t, ns)
	if revision(&rss[0]) != 3 || revision(&rss[1]) != 4 {
		t.Errorf("kept %v, want revisions 3 and 4", summary(rss))
	}
}

// testAdopt: an orphan replica set that matches a new deployment's
// selector is adopted (and, having its template, serves as its new one, or
// as an old one scaled down if the deployment's cache saw the deployment
// first).
func testAdopt(t *testing.T, w *world) {
	ns := w.namespace(t, "adopt")
	d := newDeployment(ns, "web", 2, "nginx:1")
	orphan := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "legacy", Labels: d.Spec.Template.Labels},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr[int32](2), Selector: d.Spec.Selector.DeepCopy(), Template: *d.Spec.Template.DeepCopy(),
		},
	}
	orphan, err := w.client.AppsV1().ReplicaSets(ns).Create(context.Background(), orphan, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d = w.create(t, d)
	w.complete(t, ns, "web")
	eventually(t, wait, "adoption", func() bool {
		rs, err := w.client.AppsV1().ReplicaSets(ns).Get(context.Background(), "legacy", metav1.GetOptions{})
		if err != nil {
			return false
		}
		ref := metav1.GetControllerOf(rs)
		return ref != nil && ref.UID == d.UID && rs.UID == orphan.UID
	})
	eventually(t, wait, "2 pods after adoption", func() bool { return len(w.pods(t, ns)) == 2 })
}

func summary(rss []appsv1.ReplicaSet) []string {
	var out []string
	for _, rs := range rss {
		out = append(out, fmt.Sprintf("%s(rev %s, hist %q, spec %d, status %d/%d)", rs.Name, rs.Annotations[RevisionAnnotation],
			rs.Annotations[RevisionHistoryAnnotation], *rs.Spec.Replicas, rs.Status.AvailableReplicas, rs.Status.Replicas))
	}
	return out
}

func ptr[T any](v T) *T { return &v }

// kubectl runs the real kubectl against the test control plane; the test
// is skipped if there is none. kubectl sends no bearer token over plain
// HTTP, so it goes through a loopback proxy that adds the admin's.
func kubectl(t *testing.T, w *world, args ...string) (string, error) {
	t.Helper()
	if _, err := exec.LookPath("kubectl"); err != nil {
		t.Skip("kubectl not installed")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "kubectl", append([]string{"--server", w.proxy, "--cache-dir", t.TempDir()}, args...)...)
	cmd.Env = append(os.Environ(), "KUBECONFIG=/dev/null")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// podWatch checks the pods of a namespace at every change, in log order.
type podWatch struct {
	cancel context.CancelFunc
	done   chan error

	mu         sync.Mutex
	violations []string
	maxPods    int
	minReady   int
}

// watchPods checks that there are never more than maxPods pods and never
// fewer than minReady ready ones.
func watchPods(t *testing.T, w *world, ns string, maxPods, minReady int) *podWatch {
	pw := &podWatch{minReady: 1 << 30}
	watchPodsWith(t, w, ns, pw, func(pods []*corev1.Pod) {
		ready := 0
		for _, p := range pods {
			if podReady(p) {
				ready++
			}
		}
		pw.mu.Lock()
		defer pw.mu.Unlock()
		pw.maxPods = max(pw.maxPods, len(pods))
		pw.minReady = min(pw.minReady, ready)
		if len(pods) > maxPods || ready < minReady {
			pw.violations = append(pw.violations, fmt.Sprintf("%d pods (max %d), %d ready (min %d)", len(pods), maxPods, ready, minReady))
		}
	})
	return pw
}

func watchPodsWith(t *testing.T, w *world, ns string, pw *podWatch, check func([]*corev1.Pod)) *podWatch {
	t.Helper()
	cache, err := consumer.NewCache(consumer.CacheConfig[*corev1.Pod]{Resource: podsGVR, Namespace: ns, Config: w.env.Config, JS: w.env.JS})
	if err != nil {
		t.Fatal(err)
	}
	pw.done = make(chan error, 1)
	var ctx context.Context
	ctx, pw.cancel = context.WithCancel(context.Background())
	each := func(*events.Event) {
		var live []*corev1.Pod
		for _, p := range cache.List(nil) {
			if p.DeletionTimestamp == nil {
				live = append(live, p)
			}
		}
		check(live)
	}
	cache.AddHandler(consumer.Handler[*corev1.Pod]{
		OnAdd:    func(_ *corev1.Pod, ev *events.Event) { each(ev) },
		OnUpdate: func(_, _ *corev1.Pod, ev *events.Event) { each(ev) },
		OnDelete: func(_ *corev1.Pod, ev *events.Event) { each(ev) },
	})
	go func() { pw.done <- cache.Run(ctx) }()
	sctx, scancel := context.WithTimeout(context.Background(), wait)
	defer scancel()
	if err := cache.WaitForSync(sctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pw.stop(t) })
	return pw
}

// stop ends the watch (once) and reports the violations seen.
func (pw *podWatch) stop(t *testing.T) {
	t.Helper()
	if pw.cancel == nil {
		return
	}
	pw.cancel()
	pw.cancel = nil
	<-pw.done
	pw.mu.Lock()
	defer pw.mu.Unlock()
	for _, v := range pw.violations {
		t.Errorf("bound broken: %s", v)
	}
}
