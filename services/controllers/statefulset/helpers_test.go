package statefulset

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/events/consumer"
	"github.com/cairn-dev/cairn/events/consumer/consumertest"
	"github.com/cairn-dev/cairn/services/cairn/cairntest"
	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const wait = 60 * time.Second

// world is a control plane running the StatefulSet controller (as the
// controller manager) and a stand-in kubelet (cairntest.StartKubelet)
// that reports the pods it admits Running and Ready and finishes
// deletes; gate decides which pods it admits.
type world struct {
	env *controlplanetest.Env

	mu   sync.Mutex
	gate func(p *corev1.Pod) bool
}

func start(t testing.TB) *world {
	t.Helper()
	w := newWorld(t)
	w.replica(t, nil)
	return w
}

// newWorld is the control plane and the kubelet, without a controller.
func newWorld(t testing.TB) *world {
	t.Helper()
	// TLS: a kubeconfig sends its token only over https.
	env := controlplanetest.Start(t, controlplanetest.Options{TLS: true})
	w := &world{env: env, gate: func(*corev1.Pod) bool { return true }}
	cairntest.StartKubelet(t, env.Kubeconfig, cairntest.KubeletConfig{FinishDeletes: true, Admit: func(p *corev1.Pod) bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.gate(p)
	}})
	return w
}

// replica runs a controller-manager replica with the StatefulSet
// controller (tweak: its sharding) until stop or the end of the test.
func (w *world) replica(t testing.TB, tweak func(*consumer.ManagerOptions)) (stop func()) {
	t.Helper()
	m := consumertest.Manager(t, w.env, controlplanetest.ControllerToken, controlplanetest.Logger("STS_TEST_LOG"), tweak)
	if _, err := New(m, Options{}); err != nil {
		t.Fatal(err)
	}
	return controlplanetest.RunStoppable(t, m)
}

// admit sets which pods the kubelet starts from now on.
func (w *world) admit(gate func(p *corev1.Pod) bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.gate = gate
}

func (w *world) namespace(t testing.TB, ns string) {
	t.Helper()
	if _, err := w.env.Client.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func ptr[T any](v T) *T { return &v }

// newSet is a StatefulSet of replicas pods app=name, served by Service
// name, as the API defaults it (OrderedReady, RollingUpdate).
func newSet(ns, name string, replicas int32) *appsv1.StatefulSet {
	lbls := map[string]string{"app": name}
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr(replicas), ServiceName: name,
			Selector: &metav1.LabelSelector{MatchLabels: lbls},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: lbls},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox:1"}}},
			},
		},
	}
}

func (w *world) create(t testing.TB, set *appsv1.StatefulSet) *appsv1.StatefulSet {
	t.Helper()
	got, err := w.env.Client.AppsV1().StatefulSets(set.Namespace).Create(context.Background(), set, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create statefulset: %v", err)
	}
	return got
}

func (w *world) get(t testing.TB, ns, name string) *appsv1.StatefulSet {
	t.Helper()
	got, err := w.env.Client.AppsV1().StatefulSets(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get statefulset: %v", err)
	}
	return got
}

// update applies change to the set, retrying conflicts.
func (w *world) update(t testing.TB, ns, name string, change func(*appsv1.StatefulSet)) *appsv1.StatefulSet {
	t.Helper()
	for {
		set := w.get(t, ns, name)
		change(set)
		got, err := w.env.Client.AppsV1().StatefulSets(ns).Update(context.Background(), set, metav1.UpdateOptions{})
		if err == nil {
			return got
		}
		if !apierrors.IsConflict(err) {
			t.Fatalf("update statefulset: %v", err)
		}
	}
}

func setImage(image string) func(*appsv1.StatefulSet) {
	return func(s *appsv1.StatefulSet) { s.Spec.Template.Spec.Containers[0].Image = image }
}

// waitSet waits for the set to satisfy cond.
func (w *world) waitSet(t testing.TB, ns, name, what string, cond func(*appsv1.StatefulSet) bool) *appsv1.StatefulSet {
	t.Helper()
	var set *appsv1.StatefulSet
	defer func() {
		if t.Failed() && set != nil {
			t.Logf("%s: last status %+v; pods:", name, set.Status)
			for _, p := range w.pods(t, ns) {
				t.Logf("  %s %s %s ready=%v deleting=%v", p.Name, p.Labels[appsv1.StatefulSetRevisionLabel], p.Status.Phase, isRunningAndReady(&p), p.DeletionTimestamp != nil)
			}
		}
	}()
	controlplanetest.Eventually(t, wait, name+": "+what, func() bool {
		set = w.get(t, ns, name)
		return cond(set)
	})
	return set
}

// settled: the controller saw the latest spec and every replica is
// Ready and at the update revision, which is the current one.
func settled(set *appsv1.StatefulSet) bool {
	n := *set.Spec.Replicas
	st := set.Status
	return st.ObservedGeneration == set.Generation && st.Replicas == n && st.ReadyReplicas == n &&
		st.AvailableReplicas == n && st.UpdatedReplicas == n && st.CurrentReplicas == n &&
		st.UpdateRevision != "" && st.CurrentRevision == st.UpdateRevision
}

// pods lists the pods of ns, sorted by name.
func (w *world) pods(t testing.TB, ns string) []corev1.Pod {
	t.Helper()
	list, err := w.env.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list pods: %v", err)
	}
	slices.SortFunc(list.Items, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return list.Items
}

func names(pods []corev1.Pod) []string {
	out := make([]string, len(pods))
	for i, p := range pods {
		out[i] = p.Name
	}
	return out
}

func (w *world) revisions(t testing.TB, ns string) []appsv1.ControllerRevision {
	t.Helper()
	list, err := w.env.Client.AppsV1().ControllerRevisions(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list controllerrevisions: %v", err)
	}
	return list.Items
}

// podEvents is every pod event of ns on the log, in commit order.
func (w *world) podEvents(t testing.TB, ns string) []*events.Event {
	t.Helper()
	controlplanetest.WaitForLog(t, w.env)
	var out []*events.Event
	err := events.Tail(context.Background(), w.env.JS, events.TailOptions{Resource: "pods", Namespace: ns}, func(ev *events.Event) error {
		out = append(out, ev)
		return nil
	})
	if err != nil {
		t.Fatalf("tail: %v", err)
	}
	return out
}

func podOf(t testing.TB, ev *events.Event) *corev1.Pod {
	t.Helper()
	var p corev1.Pod
	if err := json.Unmarshal(ev.Object, &p); err != nil {
		t.Fatalf("decode pod: %v", err)
	}
	return &p
}

// firstRevision is the log revision of the first event of pod name after
// revision from that satisfies cond, 0 if none does.
func firstRevision(t testing.TB, evs []*events.Event, from int64, name string, cond func(ev *events.Event, p *corev1.Pod) bool) events.Revision {
	t.Helper()
	for _, ev := range evs {
		if int64(ev.Revision) > from && ev.Name == name && cond(ev, podOf(t, ev)) {
			return ev.Revision
		}
	}
	return 0
}

func added(ev *events.Event, _ *corev1.Pod) bool { return ev.Type == events.Added }
func ready(_ *events.Event, p *corev1.Pod) bool  { return isRunningAndReady(p) }

// leaving: the pod is being deleted or is gone.
func leaving(ev *events.Event, p *corev1.Pod) bool {
	return ev.Type == events.Deleted || p.DeletionTimestamp != nil
}

func deleted(ev *events.Event, _ *corev1.Pod) bool { return ev.Type == events.Deleted }
