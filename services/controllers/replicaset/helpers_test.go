package replicaset

import (
	"context"
	"encoding/json"
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
	"k8s.io/apimachinery/pkg/types"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/events/consumer/consumertest"
	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// start runs a control plane and the controller (as the controller
// manager) until the test ends, and creates namespace ns.
func start(t *testing.T, ns string) *controlplanetest.Env {
	t.Helper()
	env, _ := startController(t, ns)
	return env
}

// startController is start, and also returns the controller, for tests
// that must wait for what its caches have seen.
func startController(t *testing.T, ns string) (*controlplanetest.Env, *Controller) {
	t.Helper()
	env := controlplanetest.Start(t)
	m := consumertest.Manager(t, env, controlplanetest.ControllerToken, controlplanetest.Logger("RS_TEST_LOG"), nil)
	c, err := New(m, Options{})
	if err != nil {
		t.Fatal(err)
	}
	controlplanetest.RunSynced(t, m)
	_, err = env.Client.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return env, c
}

// eventually polls cond until it holds or d passes.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

const wait = 30 * time.Second

func newRS(ns, name string, replicas int32, lbls map[string]string) *appsv1.ReplicaSet {
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: lbls},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: lbls, Annotations: map[string]string{"note": "from-template"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}},
			},
		},
	}
}

func createRS(t *testing.T, env *controlplanetest.Env, rs *appsv1.ReplicaSet) *appsv1.ReplicaSet {
	t.Helper()
	got, err := env.Client.AppsV1().ReplicaSets(rs.Namespace).Create(context.Background(), rs, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create replicaset: %v", err)
	}
	return got
}

func getRS(t *testing.T, env *controlplanetest.Env, ns, name string) *appsv1.ReplicaSet {
	t.Helper()
	rs, err := env.Client.AppsV1().ReplicaSets(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get replicaset: %v", err)
	}
	return rs
}

// scale sets spec.replicas, retrying conflicts with the controller's
// status writes.
func scale(t *testing.T, env *controlplanetest.Env, ns, name string, n int32) *appsv1.ReplicaSet {
	t.Helper()
	for {
		rs := getRS(t, env, ns, name)
		rs.Spec.Replicas = &n
		got, err := env.Client.AppsV1().ReplicaSets(ns).Update(context.Background(), rs, metav1.UpdateOptions{})
		if err == nil {
			return got
		}
		if !apierrors.IsConflict(err) {
			t.Fatalf("scale to %d: %v", n, err)
		}
	}
}

// ownedPods lists the pods controlled by the ReplicaSet with that UID
// (terminating ones included), sorted by name.
func ownedPods(t *testing.T, env *controlplanetest.Env, ns string, uid types.UID) []corev1.Pod {
	t.Helper()
	list, err := env.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list pods: %v", err)
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if ref := metav1.GetControllerOf(&p); ref != nil && ref.UID == uid {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// waitPods waits for the ReplicaSet to control exactly n pods.
func waitPods(t *testing.T, env *controlplanetest.Env, rs *appsv1.ReplicaSet, n int) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	eventually(t, wait, "pods of "+rs.Name, func() bool {
		pods = ownedPods(t, env, rs.Namespace, rs.UID)
		return len(pods) == n
	})
	return pods
}

// setStatus acts as the kubelet: it sets the pod's phase and, if ready,
// a Ready condition that became true at `since`.
func setStatus(t *testing.T, env *controlplanetest.Env, p corev1.Pod, phase corev1.PodPhase, ready bool, since time.Time) {
	t.Helper()
	for {
		cur, err := env.Client.CoreV1().Pods(p.Namespace).Get(context.Background(), p.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get pod %s: %v", p.Name, err)
		}
		cur.Status.Phase = phase
		st := corev1.ConditionFalse
		if ready {
			st = corev1.ConditionTrue
		}
		cur.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: st, LastTransitionTime: metav1.NewTime(since)}}
		_, err = env.Client.CoreV1().Pods(p.Namespace).UpdateStatus(context.Background(), cur, metav1.UpdateOptions{})
		if err == nil {
			return
		}
		if !apierrors.IsConflict(err) {
			t.Fatalf("update status of pod %s: %v", p.Name, err)
		}
	}
}

// waitStatus waits for the ReplicaSet's status to satisfy cond.
func waitStatus(t *testing.T, env *controlplanetest.Env, ns, name, what string, cond func(rs *appsv1.ReplicaSet) bool) *appsv1.ReplicaSet {
	t.Helper()
	var rs *appsv1.ReplicaSet
	eventually(t, wait, what, func() bool {
		rs = getRS(t, env, ns, name)
		return cond(rs)
	})
	return rs
}

// podEvents reads every pod event of namespace ns stored so far, from
// revision from on.
func podEvents(t *testing.T, env *controlplanetest.Env, ns string, from events.Revision) []*events.Event {
	t.Helper()
	controlplanetest.WaitForLog(t, env)
	var out []*events.Event
	err := events.Tail(context.Background(), env.JS, events.TailOptions{Resource: "pods", Namespace: ns, FromRevision: from}, func(ev *events.Event) error {
		out = append(out, ev)
		return nil
	})
	if err != nil {
		t.Fatalf("tail: %v", err)
	}
	return out
}

func revisionOf(t *testing.T, obj metav1.Object) events.Revision {
	t.Helper()
	r, err := events.ParseRevision(obj.GetResourceVersion())
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// eventAt reads the event of one revision of an object from the log,
// waiting for the publisher.
func eventAt(t *testing.T, env *controlplanetest.Env, group, resource, ns, name string, r events.Revision) *events.Event {
	t.Helper()
	var found *events.Event
	eventually(t, wait, fmt.Sprintf("event %d on the log", r), func() bool {
		err := events.Tail(context.Background(), env.JS, events.TailOptions{Group: group, Resource: resource, Namespace: ns, Name: name, FromRevision: r}, func(ev *events.Event) error {
			if ev.Revision == r && found == nil {
				found = ev
			}
			return nil
		})
		if err != nil {
			t.Fatalf("tail: %v", err)
		}
		return found != nil
	})
	return found
}

// podOf decodes the pod an event carries.
func podOf(t *testing.T, ev *events.Event) *corev1.Pod {
	t.Helper()
	var p corev1.Pod
	if err := json.Unmarshal(ev.Object, &p); err != nil {
		t.Fatalf("decode pod of event %s: %v", ev.ID, err)
	}
	return &p
}

// controlledBy reports whether the pod of ev is controlled by uid.
func controlledBy(t *testing.T, ev *events.Event, uid types.UID) bool {
	t.Helper()
	ref := metav1.GetControllerOf(podOf(t, ev))
	return ref != nil && ref.UID == uid
}
