package daemonset

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cairn-dev/cairn/events/consumer"
	"github.com/cairn-dev/cairn/events/consumer/consumertest"
	"github.com/cairn-dev/cairn/services/cairn/cairntest"
	"github.com/cairn-dev/cairn/services/controllers/deployment"
	"github.com/cairn-dev/cairn/services/controllers/gc"
	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const wait = 45 * time.Second

// start runs a control plane and the DaemonSet controller (with the
// garbage collector) as the controller manager until the test ends, and
// creates namespace ns.
func start(t testing.TB, ns string) *controlplanetest.Env {
	t.Helper()
	env, _ := startManager(t, ns)
	return env
}

// startManager is start, and also returns the manager, for tests that
// must wait until its caches have applied the log.
func startManager(t testing.TB, ns string) (*controlplanetest.Env, *consumer.Manager) {
	t.Helper()
	env := controlplanetest.Start(t)
	m := consumertest.Manager(t, env, controlplanetest.ControllerToken, controlplanetest.Logger("DS_TEST_LOG"), nil)
	if _, err := New(m, Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := gc.New(m, gc.Options{}); err != nil {
		t.Fatal(err)
	}
	controlplanetest.RunSynced(t, m)
	if _, err := env.Client.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return env, m
}

func newDS(ns, name string) *appsv1.DaemonSet {
	lbls := map[string]string{"app": name}
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: lbls},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: lbls},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox:1"}}},
			},
		},
	}
}

func createDS(t testing.TB, env *controlplanetest.Env, ds *appsv1.DaemonSet) *appsv1.DaemonSet {
	t.Helper()
	got, err := env.Client.AppsV1().DaemonSets(ds.Namespace).Create(context.Background(), ds, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create daemonset: %v", err)
	}
	return got
}

func getDS(t testing.TB, env *controlplanetest.Env, ns, name string) *appsv1.DaemonSet {
	t.Helper()
	ds, err := env.Client.AppsV1().DaemonSets(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get daemonset: %v", err)
	}
	return ds
}

// updateDS applies change to a fresh copy, retrying conflicts with the
// controller's status writes.
func updateDS(t *testing.T, env *controlplanetest.Env, ns, name string, change func(*appsv1.DaemonSet)) *appsv1.DaemonSet {
	t.Helper()
	for {
		ds := getDS(t, env, ns, name)
		change(ds)
		got, err := env.Client.AppsV1().DaemonSets(ns).Update(context.Background(), ds, metav1.UpdateOptions{})
		if err == nil {
			return got
		}
		if !apierrors.IsConflict(err) {
			t.Fatalf("update daemonset: %v", err)
		}
	}
}

// setImage changes the template's image: a new revision.
func setImage(t *testing.T, env *controlplanetest.Env, ns, name, image string) *appsv1.DaemonSet {
	t.Helper()
	return updateDS(t, env, ns, name, func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.Containers[0].Image = image })
}

type nodeOpt func(*corev1.Node)

func withLabels(kv ...string) nodeOpt {
	return func(n *corev1.Node) {
		if n.Labels == nil {
			n.Labels = map[string]string{}
		}
		for i := 0; i+1 < len(kv); i += 2 {
			n.Labels[kv[i]] = kv[i+1]
		}
	}
}

func withTaint(key string, effect corev1.TaintEffect) nodeOpt {
	return func(n *corev1.Node) { n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: key, Effect: effect}) }
}

func createNode(t testing.TB, env *controlplanetest.Env, name string, opts ...nodeOpt) *corev1.Node {
	t.Helper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	for _, o := range opts {
		o(n)
	}
	got, err := env.Client.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create node %s: %v", name, err)
	}
	return got
}

func updateNode(t *testing.T, env *controlplanetest.Env, name string, change func(*corev1.Node)) {
	t.Helper()
	for {
		n, err := env.Client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		change(n)
		_, err = env.Client.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{})
		if err == nil {
			return
		}
		if !apierrors.IsConflict(err) {
			t.Fatalf("update node %s: %v", name, err)
		}
	}
}

// daemonPods is the live (not terminating) pods the DaemonSet uid
// controls.
func daemonPods(t *testing.T, env *controlplanetest.Env, ns string, uid types.UID) []corev1.Pod {
	t.Helper()
	list, err := env.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if ref := metav1.GetControllerOf(&p); ref != nil && ref.UID == uid && p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

// podNodes is the target nodes of pods, sorted, one entry per pod.
func podNodes(t *testing.T, pods []corev1.Pod) []string {
	t.Helper()
	var out []string
	for i := range pods {
		n, err := targetNode(&pods[i])
		if err != nil {
			t.Fatalf("pod %s: %v", pods[i].Name, err)
		}
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// waitNodes waits until the DaemonSet's live pods are exactly one on each
// of nodes, and returns them.
func waitNodes(t *testing.T, env *controlplanetest.Env, ds *appsv1.DaemonSet, nodes ...string) []corev1.Pod {
	t.Helper()
	slices.Sort(nodes)
	var pods []corev1.Pod
	var got []string
	deadline := time.Now().Add(wait)
	for {
		pods = daemonPods(t, env, ds.Namespace, ds.UID)
		got = podNodes(t, pods)
		if slices.Equal(got, nodes) {
			return pods
		}
		if time.Now().After(deadline) {
			t.Fatalf("daemon pods on %v, want %v", got, nodes)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// markReady reports pod Running and Ready, as a kubelet would.
func markReady(t *testing.T, env *controlplanetest.Env, p corev1.Pod) {
	t.Helper()
	for {
		cur, err := env.Client.CoreV1().Pods(p.Namespace).Get(context.Background(), p.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		cairntest.SetRunning(cur)
		_, err = env.Client.CoreV1().Pods(p.Namespace).UpdateStatus(context.Background(), cur, metav1.UpdateOptions{})
		if err == nil || apierrors.IsNotFound(err) {
			return
		}
		if !apierrors.IsConflict(err) {
			t.Fatalf("mark %s ready: %v", p.Name, err)
		}
	}
}

// readyAll marks every live pod of the DaemonSet ready.
func readyAll(t *testing.T, env *controlplanetest.Env, ds *appsv1.DaemonSet) {
	t.Helper()
	for _, p := range daemonPods(t, env, ds.Namespace, ds.UID) {
		if !isReady(&p) {
			markReady(t, env, p)
		}
	}
}

// byRevision splits pods by whether their controller-revision-hash is
// hash.
func byRevision(pods []corev1.Pod, hash string) (cur, old []corev1.Pod) {
	for _, p := range pods {
		if p.Labels[appsv1.DefaultDaemonSetUniqueLabelKey] == hash {
			cur = append(cur, p)
		} else {
			old = append(old, p)
		}
	}
	return cur, old
}

// currentHash is the controller-revision-hash of the DaemonSet's newest
// ControllerRevision, once there is one whose data holds image.
func currentHash(t *testing.T, env *controlplanetest.Env, ds *appsv1.DaemonSet, image string) string {
	t.Helper()
	var hash string
	controlplanetest.Eventually(t, wait, "a revision with image "+image, func() bool {
		revs := revisions(t, env, ds)
		if len(revs) == 0 {
			return false
		}
		newest := revs[len(revs)-1]
		if !strings.Contains(string(newest.Data.Raw), `"image":"`+image+`"`) {
			return false
		}
		hash = newest.Labels[appsv1.DefaultDaemonSetUniqueLabelKey]
		return true
	})
	return hash
}

// revisions is the DaemonSet's ControllerRevisions, oldest first.
func revisions(t *testing.T, env *controlplanetest.Env, ds *appsv1.DaemonSet) []appsv1.ControllerRevision {
	t.Helper()
	list, err := env.Client.AppsV1().ControllerRevisions(ds.Namespace).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []appsv1.ControllerRevision
	for _, r := range list.Items {
		if ref := metav1.GetControllerOf(&r); ref != nil && ref.UID == ds.UID {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b appsv1.ControllerRevision) int { return int(a.Revision - b.Revision) })
	return out
}

// waitStatus waits until the DaemonSet's status satisfies ok.
func waitStatus(t testing.TB, env *controlplanetest.Env, ds *appsv1.DaemonSet, what string, ok func(appsv1.DaemonSetStatus) bool) appsv1.DaemonSetStatus {
	t.Helper()
	var st appsv1.DaemonSetStatus
	deadline := time.Now().Add(wait)
	for {
		cur := getDS(t, env, ds.Namespace, ds.Name)
		st = cur.Status
		if st.ObservedGeneration == cur.Generation && ok(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("status %s: got %+v", what, fmt.Sprintf("%+v", st))
		}
		time.Sleep(25 * time.Millisecond)
	}
}

func computeHashFor(ds *appsv1.DaemonSet, collisions *int32) string {
	return deployment.ComputeHash(&ds.Spec.Template, collisions)
}

func rawJSON(s string) runtime.RawExtension { return runtime.RawExtension{Raw: []byte(s)} }
