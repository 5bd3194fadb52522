package replicaset

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
)

func TestCreatePods(t *testing.T) {
	env := start(t, "create")
	lbls := map[string]string{"app": "web", "tier": "front"}
	rs := createRS(t, env, newRS("create", "web", 3, lbls))
	pods := waitPods(t, env, rs, 3)

	name := regexp.MustCompile(`^web-[a-z0-9]{5}$`)
	for _, p := range pods {
		if !name.MatchString(p.Name) || p.GenerateName != "web-" {
			t.Errorf("pod name %q (generateName %q), want web-<5 chars>", p.Name, p.GenerateName)
		}
		if p.Labels["app"] != "web" || p.Labels["tier"] != "front" || len(p.Labels) != 2 {
			t.Errorf("pod %s labels %v, want %v", p.Name, p.Labels, lbls)
		}
		if p.Annotations["note"] != "from-template" {
			t.Errorf("pod %s annotations %v, want the template's", p.Name, p.Annotations)
		}
		refs := p.OwnerReferences
		if len(refs) != 1 {
			t.Fatalf("pod %s ownerReferences %+v, want one", p.Name, refs)
		}
		r := refs[0]
		if r.APIVersion != "apps/v1" || r.Kind != "ReplicaSet" || r.Name != "web" || r.UID != rs.UID ||
			r.Controller == nil || !*r.Controller || r.BlockOwnerDeletion == nil || !*r.BlockOwnerDeletion {
			t.Errorf("pod %s ownerReference %+v, want apps/v1 ReplicaSet web %s controller blockOwnerDeletion", p.Name, r, rs.UID)
		}
		if len(p.Spec.Containers) != 1 || p.Spec.Containers[0].Image != "nginx" {
			t.Errorf("pod %s spec %+v, want the template's", p.Name, p.Spec)
		}
	}
	got := waitStatus(t, env, "create", "web", "status.replicas 3", func(rs *appsv1.ReplicaSet) bool {
		return rs.Status.Replicas == 3 && rs.Status.ObservedGeneration == rs.Generation
	})
	if got.Status.FullyLabeledReplicas != 3 || got.Status.ReadyReplicas != 0 || got.Status.AvailableReplicas != 0 {
		t.Errorf("status %+v, want 3 fully labeled, none ready", got.Status)
	}

	t.Run("a deleted pod is replaced", func(t *testing.T) {
		if err := env.Client.CoreV1().Pods("create").Delete(context.Background(), pods[0].Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, wait, "a replacement", func() bool {
			now := ownedPods(t, env, "create", rs.UID)
			return len(now) == 3 && now[0].Name != pods[0].Name && now[1].Name != pods[0].Name && now[2].Name != pods[0].Name
		})
	})
}

// TestScale scales up, then down, and checks that the least useful pods go
// first and that the status follows.
func TestScale(t *testing.T) {
	env := start(t, "scale")
	rs := createRS(t, env, newRS("scale", "app", 3, map[string]string{"app": "scale"}))
	waitPods(t, env, rs, 3)

	rs = scale(t, env, "scale", "app", 5)
	pods := waitPods(t, env, rs, 5)

	// Two ready Running pods (the survivors), one Running but not ready,
	// two Pending.
	now := time.Now()
	setStatus(t, env, pods[2], corev1.PodRunning, false, now)
	setStatus(t, env, pods[3], corev1.PodPending, false, now)
	setStatus(t, env, pods[0], corev1.PodRunning, true, now.Add(-time.Minute))
	setStatus(t, env, pods[1], corev1.PodRunning, true, now.Add(-time.Minute))
	st := waitStatus(t, env, "scale", "app", "readyReplicas 2", func(rs *appsv1.ReplicaSet) bool {
		return rs.Status.ReadyReplicas == 2 && rs.Status.AvailableReplicas == 2
	})
	if st.Status.Replicas != 5 || st.Status.FullyLabeledReplicas != 5 || st.Status.ObservedGeneration != st.Generation {
		t.Errorf("status %+v (generation %d), want 5 replicas, 5 fully labeled, generation observed", st.Status, st.Generation)
	}

	rs = scale(t, env, "scale", "app", 2)
	left := waitPods(t, env, rs, 2)
	want := []string{pods[0].Name, pods[1].Name}
	if left[0].Name != want[0] || left[1].Name != want[1] {
		t.Errorf("after scale-down: pods %s %s, want the ready ones %v", left[0].Name, left[1].Name, want)
	}
	st = waitStatus(t, env, "scale", "app", "status after scale-down", func(got *appsv1.ReplicaSet) bool {
		return got.Status.Replicas == 2 && got.Status.ObservedGeneration == rs.Generation
	})
	if st.Status.ReadyReplicas != 2 || st.Status.AvailableReplicas != 2 || st.Status.FullyLabeledReplicas != 2 {
		t.Errorf("status %+v, want 2 ready, available and fully labeled", st.Status)
	}

	// Each create and delete is an Event on the ReplicaSet, as kube's
	// (kubectl describe rs lists them).
	var wantCreated, wantDeleted []string
	for _, p := range pods {
		wantCreated = append(wantCreated, "Created pod: "+p.Name)
	}
	for _, p := range pods[2:] {
		wantDeleted = append(wantDeleted, "Deleted pod: "+p.Name)
	}
	checkEvents(t, env, "scale", "app", ReasonSuccessfulCreate, wantCreated)
	checkEvents(t, env, "scale", "app", ReasonSuccessfulDelete, wantDeleted)
}

// checkEvents waits until the Events with reason about the ReplicaSet name
// carry exactly the messages want, each once, from replicaset-controller.
func checkEvents(t *testing.T, env *controlplanetest.Env, ns, name, reason string, want []string) {
	t.Helper()
	var got []string
	controlplanetest.Eventually(t, wait, fmt.Sprintf("%d %s events", len(want), reason), func() bool {
		got = got[:0]
		for _, ev := range controlplanetest.ListEvents(t, env, ns, name, reason) {
			if ev.Source.Component != Component || ev.InvolvedObject.Kind != "ReplicaSet" || ev.Type != corev1.EventTypeNormal || ev.Count != 1 {
				t.Fatalf("event %+v, want a Normal one from %s about the ReplicaSet", ev, Component)
			}
			got = append(got, ev.Message)
		}
		return len(got) >= len(want)
	})
	slices.Sort(got)
	want = slices.Sorted(slices.Values(want))
	if !slices.Equal(got, want) {
		t.Errorf("%s events say %q, want %q", reason, got, want)
	}
}

// TestMinReadySeconds checks availableReplicas: a pod counts as available
// minReadySeconds after it became ready, and the controller comes back by
// itself to notice.
func TestMinReadySeconds(t *testing.T) {
	env := start(t, "minready")
	soon := newRS("minready", "soon", 1, map[string]string{"app": "soon"})
	soon.Spec.MinReadySeconds = 2
	late := newRS("minready", "late", 1, map[string]string{"app": "late"})
	late.Spec.MinReadySeconds = 3600
	soonRS, lateRS := createRS(t, env, soon), createRS(t, env, late)
	setStatus(t, env, waitPods(t, env, soonRS, 1)[0], corev1.PodRunning, true, time.Now())
	setStatus(t, env, waitPods(t, env, lateRS, 1)[0], corev1.PodRunning, true, time.Now())

	waitStatus(t, env, "minready", "soon", "the pod of soon to become available", func(rs *appsv1.ReplicaSet) bool {
		return rs.Status.ReadyReplicas == 1 && rs.Status.AvailableReplicas == 1
	})
	st := waitStatus(t, env, "minready", "late", "the pod of late to be ready", func(rs *appsv1.ReplicaSet) bool {
		return rs.Status.ReadyReplicas == 1
	})
	if st.Status.AvailableReplicas != 0 {
		t.Errorf("late: availableReplicas %d, want 0 (minReadySeconds 3600)", st.Status.AvailableReplicas)
	}
}

func TestAdoptAndRelease(t *testing.T) {
	env := start(t, "adopt")
	ctx := context.Background()
	lbls := map[string]string{"app": "adopt"}
	orphan, err := env.Client.CoreV1().Pods("adopt").Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "orphan", Labels: lbls},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	other, err := env.Client.CoreV1().Pods("adopt").Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "other", Labels: map[string]string{"app": "other"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	// The orphan is ready: if the ReplicaSet's pod cache is behind its
	// ReplicaSet cache, the ReplicaSet creates two pods, adopts the orphan
	// and then deletes an unready pod, not the orphan (as kube would).
	setStatus(t, env, *orphan, corev1.PodRunning, true, time.Now().Add(-time.Minute))

	rs := createRS(t, env, newRS("adopt", "web", 2, lbls))
	var adopted *corev1.Pod
	eventually(t, wait, "the orphan to be adopted, and 2 pods", func() bool {
		pods := ownedPods(t, env, "adopt", rs.UID)
		for i := range pods {
			if pods[i].Name == "orphan" {
				adopted = &pods[i]
			}
		}
		return adopted != nil && len(pods) == 2
	})
	if adopted.UID != orphan.UID {
		t.Errorf("adopted pod uid %s, want the orphan's %s", adopted.UID, orphan.UID)
	}
	if r := adopted.OwnerReferences; len(r) != 1 || r[0].UID != rs.UID || r[0].Controller == nil || !*r[0].Controller {
		t.Errorf("adopted ownerReferences %+v, want the ReplicaSet as controller", r)
	}
	if o, _ := env.Client.CoreV1().Pods("adopt").Get(ctx, other.Name, metav1.GetOptions{}); len(o.OwnerReferences) != 0 {
		t.Errorf("pod with other labels got ownerReferences %+v", o.OwnerReferences)
	}

	t.Run("release", func(t *testing.T) {
		for {
			p, err := env.Client.CoreV1().Pods("adopt").Get(ctx, "orphan", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			p.Labels = map[string]string{"app": "gone"}
			if _, err = env.Client.CoreV1().Pods("adopt").Update(ctx, p, metav1.UpdateOptions{}); err == nil {
				break
			}
		}
		eventually(t, wait, "the pod to be released", func() bool {
			p, err := env.Client.CoreV1().Pods("adopt").Get(ctx, "orphan", metav1.GetOptions{})
			return err == nil && len(p.OwnerReferences) == 0
		})
		after := waitPods(t, env, rs, 2)
		for _, p := range after {
			if p.Name == "orphan" {
				t.Errorf("released pod still counted")
			}
		}
	})
}

// TestNoOvershoot churns a ReplicaSet (metadata updates that each queue a
// round, fast scale changes) and replays the pod events of the log: the
// ReplicaSet never has more live pods than the largest replicas it was
// given, and a burst of rounds right after creation creates each pod once.
func TestNoOvershoot(t *testing.T) {
	env := start(t, "churn")
	ctx := context.Background()
	rs := createRS(t, env, newRS("churn", "c", 3, map[string]string{"app": "churn"}))
	from := revisionOf(t, rs)
	// Each update queues the ReplicaSet again, while its pods may not be in
	// the cache yet.
	for i := range 10 {
		for {
			cur := getRS(t, env, "churn", "c")
			cur.Annotations = map[string]string{"bump": string(rune('a' + i))}
			if _, err := env.Client.AppsV1().ReplicaSets("churn").Update(ctx, cur, metav1.UpdateOptions{}); err == nil {
				break
			}
		}
	}
	waitPods(t, env, rs, 3)
	waitStatus(t, env, "churn", "c", "the status to settle", func(got *appsv1.ReplicaSet) bool {
		return got.Status.Replicas == 3 && got.Status.ObservedGeneration == got.Generation
	})
	creates := 0
	for _, ev := range podEvents(t, env, "churn", from) {
		if ev.Type == events.Added && controlledBy(t, ev, rs.UID) {
			creates++
		}
	}
	if creates != 3 {
		t.Errorf("%d pods created for 3 replicas", creates)
	}

	steps := []int32{1, 6, 2, 8, 0, 5, 3}
	for _, n := range steps {
		scale(t, env, "churn", "c", n)
		time.Sleep(15 * time.Millisecond)
	}
	final := waitStatus(t, env, "churn", "c", "the status to settle on 3", func(got *appsv1.ReplicaSet) bool {
		return got.Status.Replicas == 3 && got.Status.ObservedGeneration == got.Generation
	})
	waitPods(t, env, final, 3)

	live, peak := 0, 0
	for _, ev := range podEvents(t, env, "churn", from) {
		if !controlledBy(t, ev, rs.UID) {
			continue
		}
		switch ev.Type {
		case events.Added:
			live++
		case events.Deleted:
			live--
		}
		peak = max(peak, live)
	}
	if peak > 8 || live != 3 {
		t.Errorf("pods: peak %d (largest replicas 8), at the end %d (want 3)", peak, live)
	}
}

// TestCausation follows the log: the pods a ReplicaSet change makes carry
// that change's event id as causationID.
func TestCausation(t *testing.T) {
	env := start(t, "cause")
	rs := createRS(t, env, newRS("cause", "web", 2, map[string]string{"app": "cause"}))
	created := eventAt(t, env, "apps", "replicasets", "cause", "web", revisionOf(t, rs))
	waitPods(t, env, rs, 2)
	waitStatus(t, env, "cause", "web", "the status to settle", func(got *appsv1.ReplicaSet) bool {
		return got.Status.Replicas == 2 && got.Status.ObservedGeneration == got.Generation
	})

	check := func(t *testing.T, cause *events.Event, from events.Revision, want int) {
		t.Helper()
		n := 0
		for _, ev := range podEvents(t, env, "cause", from) {
			if ev.Type != events.Added || !controlledBy(t, ev, rs.UID) {
				continue
			}
			n++
			if ev.CausationID != cause.ID || ev.CorrelationID != cause.ID || ev.Verb != "create" {
				t.Errorf("pod %s created with causation %q correlation %q verb %q, want %q (the ReplicaSet's %s event)",
					ev.Name, ev.CausationID, ev.CorrelationID, ev.Verb, cause.ID, cause.Type)
			}
		}
		if n != want {
			t.Errorf("%d pods created, want %d", n, want)
		}
	}
	t.Run("create", func(t *testing.T) { check(t, created, revisionOf(t, rs), 2) })

	t.Run("the SuccessfulCreate event", func(t *testing.T) {
		ev := controlplanetest.WaitForEvent(t, env, "cause", "web", ReasonSuccessfulCreate)
		var logged *events.Event
		if err := events.Tail(context.Background(), env.JS, events.TailOptions{Resource: "events", Namespace: "cause", Name: ev.Name}, func(e *events.Event) error {
			logged = e
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if logged == nil || logged.CausationID != created.ID || logged.CorrelationID != created.ID {
			t.Errorf("Event %s on the log: %+v; want causation and correlation %q (the ReplicaSet's create)", ev.Name, logged, created.ID)
		}
	})

	t.Run("scale up", func(t *testing.T) {
		up := scale(t, env, "cause", "web", 4)
		scaled := eventAt(t, env, "apps", "replicasets", "cause", "web", revisionOf(t, up))
		waitPods(t, env, up, 4)
		check(t, scaled, revisionOf(t, up), 2)
	})
}

// TestTerminatingPods: pods bound to a node are deleted gracefully; a
// terminating pod no longer counts, so it is replaced at once, and it is
// counted in status.terminatingReplicas.
func TestTerminatingPods(t *testing.T) {
	env := start(t, "term")
	ctx := context.Background()
	spec := newRS("term", "bound", 2, map[string]string{"app": "bound"})
	spec.Spec.Template.Spec.NodeName = "node-1" // no kubelet: deletes stay pending for the grace period
	rs := createRS(t, env, spec)
	pods := waitPods(t, env, rs, 2)
	if err := env.Client.CoreV1().Pods("term").Delete(ctx, pods[0].Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	st := waitStatus(t, env, "term", "bound", "a replacement next to the terminating pod", func(got *appsv1.ReplicaSet) bool {
		return got.Status.Replicas == 2 && got.Status.TerminatingReplicas != nil && *got.Status.TerminatingReplicas == 1
	})
	all := ownedPods(t, env, "term", rs.UID)
	terminating := 0
	for _, p := range all {
		if p.DeletionTimestamp != nil {
			terminating++
		}
	}
	if len(all) != 3 || terminating != 1 {
		t.Errorf("%d pods, %d terminating; want 3 and 1 (status %+v)", len(all), terminating, st.Status)
	}

	t.Run("scale down deletes gracefully", func(t *testing.T) {
		scale(t, env, "term", "bound", 1)
		waitStatus(t, env, "term", "bound", "replicas 1, 2 terminating", func(got *appsv1.ReplicaSet) bool {
			return got.Status.Replicas == 1 && got.Status.TerminatingReplicas != nil && *got.Status.TerminatingReplicas == 2
		})
		if n := len(ownedPods(t, env, "term", rs.UID)); n != 3 {
			t.Errorf("%d pods, want 3 (1 active, 2 terminating)", n)
		}
	})
}

// TestDeletingReplicaSet: a ReplicaSet being deleted (held by a finalizer)
// no longer replaces its pods, but still reports status.
func TestDeletingReplicaSet(t *testing.T) {
	env, c := startController(t, "deleting")
	ctx := context.Background()
	spec := newRS("deleting", "held", 2, map[string]string{"app": "held"})
	spec.Finalizers = []string{"test.cairn.dev/hold"}
	rs := createRS(t, env, spec)
	pods := waitPods(t, env, rs, 2)
	waitStatus(t, env, "deleting", "held", "status.replicas 2", func(got *appsv1.ReplicaSet) bool { return got.Status.Replicas == 2 })
	if err := env.Client.AppsV1().ReplicaSets("deleting").Delete(ctx, "held", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The ReplicaSets and the pods reach the controller through separate
	// caches. Until its ReplicaSet cache has seen the deletion, a pod
	// delete would be replaced, as in kube; that race is not what this
	// test is about.
	eventually(t, wait, "the controller to see the deletion", func() bool {
		got, ok := c.rsets.Get("deleting", "held")
		return ok && got.DeletionTimestamp != nil
	})
	if err := env.Client.CoreV1().Pods("deleting").Delete(ctx, pods[0].Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// A replacement would be created in the same round as this status,
	// and its event would come first.
	waitStatus(t, env, "deleting", "held", "status.replicas 1", func(got *appsv1.ReplicaSet) bool {
		return got.DeletionTimestamp != nil && got.Status.Replicas == 1
	})
	if n := len(ownedPods(t, env, "deleting", rs.UID)); n != 1 {
		t.Errorf("%d pods, want 1: a ReplicaSet being deleted must not create pods", n)
	}
	// Let the ReplicaSet go so the namespace is clean.
	cur := getRS(t, env, "deleting", "held")
	cur.Finalizers = nil
	if _, err := env.Client.AppsV1().ReplicaSets("deleting").Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}
