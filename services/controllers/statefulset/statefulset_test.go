package statefulset

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
)

// TestOrderedReady ports kube's ScalesUp / ScalesDown / replaces deleted
// pods cases of stateful_set_control_test.go with a real control plane
// and a stand-in kubelet driving pod status through the API.
func TestOrderedReady(t *testing.T) {
	w := start(t)
	const ns = "ordered"
	w.namespace(t, ns)
	// The kubelet holds back db-1 until the test lets it go.
	w.admit(func(p *corev1.Pod) bool { return p.Name != "db-1" })
	set := w.create(t, newSet(ns, "db", 3))

	t.Run("scale up waits for each pod to be Running and Ready", func(t *testing.T) {
		// A status of 2 replicas, 1 ready comes from a round that saw db-1
		// Pending: that round and every later one must not create db-2.
		w.waitSet(t, ns, "db", "db-1 created, not ready", func(s *appsv1.StatefulSet) bool {
			return s.Status.Replicas == 2 && s.Status.ReadyReplicas == 1
		})
		if got := names(w.pods(t, ns)); !slices.Equal(got, []string{"db-0", "db-1"}) {
			t.Fatalf("pods %v while db-1 is not ready, want [db-0 db-1]", got)
		}
		w.admit(func(*corev1.Pod) bool { return true })
		w.waitSet(t, ns, "db", "3 ready", settled)
		evs := w.podEvents(t, ns)
		for i := 1; i < 3; i++ {
			prev, cur := fmt.Sprintf("db-%d", i-1), fmt.Sprintf("db-%d", i)
			readyAt, addedAt := firstRevision(t, evs, 0, prev, ready), firstRevision(t, evs, 0, cur, added)
			if readyAt == 0 || addedAt == 0 || addedAt < readyAt {
				t.Errorf("%s created at revision %d, %s Running and Ready at %d: want it created after", cur, addedAt, prev, readyAt)
			}
		}
	})

	t.Run("identity", func(t *testing.T) {
		status := w.get(t, ns, "db").Status
		for i, p := range w.pods(t, ns) {
			want := fmt.Sprintf("db-%d", i)
			if p.Name != want || p.Spec.Hostname != want || p.Spec.Subdomain != "db" {
				t.Errorf("pod %s hostname %q subdomain %q, want %s, db", p.Name, p.Spec.Hostname, p.Spec.Subdomain, want)
			}
			if p.Labels[appsv1.StatefulSetPodNameLabel] != want || p.Labels[appsv1.PodIndexLabel] != strconv.Itoa(i) ||
				p.Labels[appsv1.StatefulSetRevisionLabel] != status.UpdateRevision || p.Labels["app"] != "db" {
				t.Errorf("pod %s labels %v, want pod-name %s, pod-index %d, controller-revision-hash %s", p.Name, p.Labels, want, i, status.UpdateRevision)
			}
			ref := metav1.GetControllerOf(&p)
			if ref == nil || ref.Kind != "StatefulSet" || ref.UID != set.UID || ref.BlockOwnerDeletion == nil || !*ref.BlockOwnerDeletion {
				t.Errorf("pod %s controller %+v, want StatefulSet db", p.Name, ref)
			}
		}
		revs := w.revisions(t, ns)
		if len(revs) != 1 || revs[0].Name != status.UpdateRevision || revs[0].Revision != 1 || revs[0].Labels["app"] != "db" ||
			status.CollisionCount == nil || *status.CollisionCount != 0 {
			t.Errorf("revisions %v, status %+v: want one, revision 1, named as status.updateRevision", revs, status)
		}
	})

	t.Run("events and causation", func(t *testing.T) {
		ev := controlplanetest.WaitForEvent(t, w.env, ns, "db", "SuccessfulCreate")
		if ev.Source.Component != Component || ev.InvolvedObject.Kind != "StatefulSet" {
			t.Errorf("event %+v, want from %s about the StatefulSet", ev, Component)
		}
		var msgs []string
		for _, e := range controlplanetest.ListEvents(t, w.env, ns, "db", "SuccessfulCreate") {
			msgs = append(msgs, e.Message)
		}
		if !slices.Contains(msgs, "create Pod db-0 in StatefulSet db successful") {
			t.Errorf("SuccessfulCreate messages %q, want kube's", msgs)
		}
		for _, ev := range w.podEvents(t, ns) {
			if ev.Type == events.Added && ev.CausationID == "" {
				t.Errorf("pod %s created without a cause", ev.Name)
			}
		}
	})

	t.Run("a deleted pod is recreated with the same name", func(t *testing.T) {
		old := w.pods(t, ns)[1]
		if err := w.env.Client.CoreV1().Pods(ns).Delete(context.Background(), "db-1", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		controlplanetest.Eventually(t, wait, "a new db-1", func() bool {
			p, err := w.env.Client.CoreV1().Pods(ns).Get(context.Background(), "db-1", metav1.GetOptions{})
			return err == nil && p.UID != old.UID && isRunningAndReady(p) && p.Spec.Hostname == "db-1"
		})
		w.waitSet(t, ns, "db", "3 ready again", settled)
	})

	t.Run("a finished pod is replaced", func(t *testing.T) {
		p, err := w.env.Client.CoreV1().Pods(ns).Get(context.Background(), "db-2", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		p.Status.Phase = corev1.PodFailed
		if _, err := w.env.Client.CoreV1().Pods(ns).UpdateStatus(context.Background(), p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		controlplanetest.Eventually(t, wait, "a new db-2", func() bool {
			q, err := w.env.Client.CoreV1().Pods(ns).Get(context.Background(), "db-2", metav1.GetOptions{})
			return err == nil && q.UID != p.UID && isRunningAndReady(q)
		})
		ev := controlplanetest.WaitForEvent(t, w.env, ns, "db", "SuccessfulDelete")
		if ev.Message != "delete Pod db-2 in StatefulSet db successful" {
			t.Errorf("SuccessfulDelete %q, want kube's message", ev.Message)
		}
	})

	t.Run("scale down in reverse order", func(t *testing.T) {
		from := controlplanetest.WaitForLog(t, w.env)
		w.update(t, ns, "db", func(s *appsv1.StatefulSet) { s.Spec.Replicas = ptr[int32](1) })
		w.waitSet(t, ns, "db", "1 replica", settled)
		if got := names(w.pods(t, ns)); !slices.Equal(got, []string{"db-0"}) {
			t.Fatalf("pods %v, want [db-0]", got)
		}
		evs := w.podEvents(t, ns)
		gone, leaves := firstRevision(t, evs, from, "db-2", deleted), firstRevision(t, evs, from, "db-1", leaving)
		if gone == 0 || leaves == 0 || leaves < gone {
			t.Errorf("db-1 deleted at revision %d, db-2 gone at %d: want db-1 only after db-2 is gone", leaves, gone)
		}
	})
}

// TestParallel ports kube's Parallel cases: pods are created without
// waiting for the ones before them, and deleted at once.
func TestParallel(t *testing.T) {
	w := start(t)
	const ns = "parallel"
	w.namespace(t, ns)
	w.admit(func(p *corev1.Pod) bool { return p.Namespace != ns })
	s := newSet(ns, "web", 3)
	s.Spec.PodManagementPolicy = appsv1.ParallelPodManagement
	w.create(t, s)
	w.waitSet(t, ns, "web", "3 replicas, none ready", func(s *appsv1.StatefulSet) bool {
		return s.Status.Replicas == 3 && s.Status.ReadyReplicas == 0
	})
	if got := names(w.pods(t, ns)); !slices.Equal(got, []string{"web-0", "web-1", "web-2"}) {
		t.Fatalf("pods %v, want web-0..2 while none is ready", got)
	}
	// Scale down with every pod unready: Parallel does not wait.
	w.update(t, ns, "web", func(s *appsv1.StatefulSet) { s.Spec.Replicas = ptr[int32](1) })
	controlplanetest.Eventually(t, wait, "web-1 and web-2 gone", func() bool {
		return slices.Equal(names(w.pods(t, ns)), []string{"web-0"})
	})
	w.admit(func(*corev1.Pod) bool { return true })
	w.waitSet(t, ns, "web", "1 ready", settled)

	t.Run("immutable fields", func(t *testing.T) { testValidation(t, w) })
	t.Run("minReadySeconds", func(t *testing.T) { testMinReady(t, w) })
	t.Run("volumeClaimTemplates", func(t *testing.T) { testClaims(t, w) })
	t.Run("adoption", func(t *testing.T) { testAdoption(t, w) })
}

// testAdoption: an orphan named as a member and matching the selector is
// adopted, not replaced (OnDelete: a RollingUpdate would replace it, as it
// has no revision label); one that matches but is not named as a member
// (kube's isMemberOf filter) is left alone.
func testAdoption(t *testing.T, w *world) {
	const ns = "adopt"
	w.namespace(t, ns)
	mk := func(name string) *corev1.Pod {
		p := newPod(newSet(ns, "web", 1), 0)
		p.Name, p.OwnerReferences = name, nil
		p.Labels = map[string]string{"app": "web"}
		got, err := w.env.Client.CoreV1().Pods(ns).Create(context.Background(), p, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	member, stranger := mk("web-0"), mk("stranger")
	s := newSet(ns, "web", 1)
	s.Spec.UpdateStrategy.Type = appsv1.OnDeleteStatefulSetStrategyType
	set := w.create(t, s)
	w.waitSet(t, ns, "web", "1 ready", func(s *appsv1.StatefulSet) bool {
		return s.Status.ObservedGeneration == s.Generation && s.Status.ReadyReplicas == 1 && s.Status.Replicas == 1
	})
	got, err := w.env.Client.CoreV1().Pods(ns).Get(context.Background(), "web-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ref := metav1.GetControllerOf(got); got.UID != member.UID || ref == nil || ref.UID != set.UID {
		t.Errorf("web-0 uid %s controller %+v, want the orphan %s adopted by %s", got.UID, ref, member.UID, set.UID)
	}
	if got.Labels[appsv1.StatefulSetPodNameLabel] != "web-0" {
		t.Errorf("adopted web-0 labels %v, want its identity added", got.Labels)
	}
	left, err := w.env.Client.CoreV1().Pods(ns).Get(context.Background(), stranger.Name, metav1.GetOptions{})
	if err != nil || metav1.GetControllerOf(left) != nil {
		t.Errorf("stranger %+v, %v: want it left without a controller", left, err)
	}
}

// testClaims: a set with volumeClaimTemplates gets a claim
// TEMPLATE-SET-ORDINAL per pod, made before the pod, labelled with the
// set's selector, named by the pod's volume and kept when the pod is
// recreated. persistentVolumeClaimRetentionPolicy Delete/Delete makes the
// set an owner of the claims it keeps, and the pod of a scaled-down
// ordinal the owner of its claims instead (the garbage collector then
// deletes them with it); the default Retain leaves claims without owners.
func testClaims(t *testing.T, w *world) {
	const ns = "claims"
	ctx := context.Background()
	w.namespace(t, ns)
	template := []corev1.PersistentVolumeClaim{{
		ObjectMeta: metav1.ObjectMeta{Name: "www"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}}
	s := newSet(ns, "data", 2)
	s.Spec.VolumeClaimTemplates = template
	s.Spec.PersistentVolumeClaimRetentionPolicy = &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
		WhenDeleted: appsv1.DeletePersistentVolumeClaimRetentionPolicyType, WhenScaled: appsv1.DeletePersistentVolumeClaimRetentionPolicyType}
	s.Spec.Template.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "www", MountPath: "/data"}}
	w.create(t, s)
	keep := newSet(ns, "keep", 1)
	keep.Spec.VolumeClaimTemplates = template
	w.create(t, keep)
	w.waitSet(t, ns, "data", "2 ready", settled)
	w.waitSet(t, ns, "keep", "1 ready", settled)
	claims := w.env.Client.CoreV1().PersistentVolumeClaims(ns)
	owners := func(name string) []string {
		c, err := claims.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("claim %s: %v", name, err)
		}
		var out []string
		for _, r := range c.OwnerReferences {
			if r.Controller != nil && *r.Controller {
				t.Errorf("claim %s: controller reference %+v", name, r)
			}
			out = append(out, r.Kind+"/"+r.Name)
		}
		return out
	}
	for _, p := range w.pods(t, ns) {
		want := "www-" + p.Name
		if v := p.Spec.Volumes; len(v) == 0 || v[0].Name != "www" || v[0].PersistentVolumeClaim == nil || v[0].PersistentVolumeClaim.ClaimName != want {
			t.Errorf("pod %s volumes %+v, want the claim %s", p.Name, v, want)
		}
		c, err := claims.Get(ctx, want, metav1.GetOptions{})
		if err != nil || c.Labels["app"] != p.Labels["app"] || !c.CreationTimestamp.Before(&p.CreationTimestamp) && !c.CreationTimestamp.Equal(&p.CreationTimestamp) {
			t.Errorf("claim %s: %v %+v", want, err, c)
		}
	}
	if got := owners("www-keep-0"); len(got) != 0 {
		t.Errorf("retained claim owners %v", got)
	}
	for _, n := range []string{"www-data-0", "www-data-1"} {
		if got := owners(n); !slices.Equal(got, []string{"StatefulSet/data"}) {
			t.Errorf("claim %s owners %v, want the set", n, got)
		}
	}

	// A pod deleted comes back on the same claim.
	before, err := claims.Get(ctx, "www-data-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.env.Client.CoreV1().Pods(ns).Delete(ctx, "data-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	w.waitSet(t, ns, "data", "data-0 back", func(s *appsv1.StatefulSet) bool {
		p, err := w.env.Client.CoreV1().Pods(ns).Get(ctx, "data-0", metav1.GetOptions{})
		return err == nil && p.DeletionTimestamp == nil && settled(s)
	})
	if after, err := claims.Get(ctx, "www-data-0", metav1.GetOptions{}); err != nil || after.UID != before.UID {
		t.Errorf("claim of the recreated pod: %v, uid %v want %v", err, after.UID, before.UID)
	}

	// Scaled down: the condemned pod owns its claim, the set no longer.
	w.update(t, ns, "data", func(s *appsv1.StatefulSet) { s.Spec.Replicas = ptr[int32](1) })
	controlplanetest.Eventually(t, wait, "www-data-1 owned by its pod", func() bool {
		return slices.Equal(owners("www-data-1"), []string{"Pod/data-1"})
	})
	if got := owners("www-data-0"); !slices.Equal(got, []string{"StatefulSet/data"}) {
		t.Errorf("kept claim owners %v", got)
	}
}

// testMinReady: with minReadySeconds, OrderedReady creates the next pod
// only once the previous one has been ready that long, and the pods count
// as available from then on (the round requeues itself for it).
func testMinReady(t *testing.T, w *world) {
	const ns = "minready"
	w.namespace(t, ns)
	s := newSet(ns, "slow", 2)
	s.Spec.MinReadySeconds = 2
	w.create(t, s)
	w.waitSet(t, ns, "slow", "2 available", settled)
	evs := w.podEvents(t, ns)
	var readySince, created time.Time
	for _, ev := range evs {
		p := podOf(t, ev)
		if ev.Name == "slow-0" && readySince.IsZero() && isRunningAndReady(p) {
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodReady {
					readySince = c.LastTransitionTime.Time
				}
			}
		}
		if ev.Name == "slow-1" && ev.Type == events.Added {
			created = ev.Time
		}
	}
	if readySince.IsZero() || created.IsZero() || created.Before(readySince.Add(2*time.Second)) {
		t.Errorf("slow-1 created at %v, slow-0 ready since %v: want 2 s (minReadySeconds) between", created, readySince)
	}
}

// TestRollingUpdate ports kube's rolling update cases: partitions,
// maxUnavailable, a rollback and the history limit; and OnDelete.
func TestRollingUpdate(t *testing.T) {
	w := start(t)
	const ns = "update"
	w.namespace(t, ns)
	s := newSet(ns, "db", 3)
	s.Spec.RevisionHistoryLimit = ptr[int32](2)
	s.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType,
		RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr[int32](1)}}
	w.create(t, s)
	first := w.waitSet(t, ns, "db", "3 ready", settled).Status.UpdateRevision

	imageOf := func(t *testing.T) map[string]string {
		out := map[string]string{}
		for _, p := range w.pods(t, ns) {
			out[p.Name] = p.Spec.Containers[0].Image + "@" + podRevision(&p)
		}
		return out
	}

	var second string
	t.Run("partition", func(t *testing.T) {
		from := controlplanetest.WaitForLog(t, w.env)
		w.update(t, ns, "db", setImage("busybox:2"))
		got := w.waitSet(t, ns, "db", "2 pods updated above the partition", func(s *appsv1.StatefulSet) bool {
			st := s.Status
			return st.ObservedGeneration == s.Generation && st.UpdatedReplicas == 2 && st.ReadyReplicas == 3 && st.CurrentReplicas == 1
		})
		second = got.Status.UpdateRevision
		if second == first || got.Status.CurrentRevision != first {
			t.Fatalf("status %+v, want currentRevision %s and a new updateRevision", got.Status, first)
		}
		want := map[string]string{"db-0": "busybox:1@" + first, "db-1": "busybox:2@" + second, "db-2": "busybox:2@" + second}
		if got := imageOf(t); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("pods %v, want %v", got, want)
		}
		evs := w.podEvents(t, ns)
		gone2, leaves1 := firstRevision(t, evs, from, "db-2", deleted), firstRevision(t, evs, from, "db-1", leaving)
		if gone2 == 0 || leaves1 < gone2 {
			t.Errorf("db-1 deleted for the update at %d, db-2 gone at %d: want the highest ordinal first", leaves1, gone2)
		}

		w.update(t, ns, "db", func(s *appsv1.StatefulSet) { s.Spec.UpdateStrategy.RollingUpdate.Partition = ptr[int32](0) })
		done := w.waitSet(t, ns, "db", "all updated", settled)
		if done.Status.CurrentRevision != second {
			t.Errorf("currentRevision %s, want %s", done.Status.CurrentRevision, second)
		}
	})

	t.Run("rollback renumbers the earlier revision", func(t *testing.T) {
		w.update(t, ns, "db", setImage("busybox:1"))
		w.waitSet(t, ns, "db", "back at busybox:1", func(s *appsv1.StatefulSet) bool {
			return settled(s) && s.Status.UpdateRevision == first
		})
		revs := map[string]int64{}
		for _, r := range w.revisions(t, ns) {
			revs[r.Name] = r.Revision
		}
		if len(revs) != 2 || revs[first] != 3 || revs[second] != 2 {
			t.Errorf("revisions %v, want %s renumbered 3 and %s 2", revs, first, second)
		}
	})

	t.Run("maxUnavailable", func(t *testing.T) {
		// Nothing new gets ready: with maxUnavailable 2, db-2 and db-1 go
		// in one round, before either is back, and db-0 stays while they
		// are unavailable. (Which of them comes back first depends on
		// whether the pod cache showed db-1 gone, as in kube.)
		w.admit(func(p *corev1.Pod) bool { return p.Namespace != ns })
		t.Cleanup(func() { w.admit(func(*corev1.Pod) bool { return true }) })
		from := controlplanetest.WaitForLog(t, w.env)
		w.update(t, ns, "db", func(s *appsv1.StatefulSet) {
			s.Spec.Template.Spec.Containers[0].Image = "busybox:3"
			s.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = ptr(intstr.FromInt32(2))
		})
		w.waitSet(t, ns, "db", "a pod recreated, unready", func(s *appsv1.StatefulSet) bool {
			st := s.Status
			return st.ObservedGeneration == s.Generation && st.UpdatedReplicas >= 1 && st.Replicas >= 2 && st.ReadyReplicas == 1
		})
		var seq []string
		for _, ev := range w.podEvents(t, ns) {
			if int64(ev.Revision) > from && (ev.Type != events.Modified || podOf(t, ev).DeletionTimestamp != nil) {
				seq = append(seq, string(ev.Type)+" "+ev.Name)
			}
		}
		if len(seq) < 3 || !slices.Equal(seq[:2], []string{"DELETED db-2", "DELETED db-1"}) || !strings.HasPrefix(seq[2], "ADDED ") {
			t.Errorf("pod changes after the update %v, want db-2 and db-1 deleted, then one created", seq)
		}
		if got := imageOf(t); got["db-0"] != "busybox:1@"+first {
			t.Errorf("pods %v: want db-0 left alone while 2 pods are unavailable", got)
		}
		w.admit(func(*corev1.Pod) bool { return true })
		w.waitSet(t, ns, "db", "all at busybox:3", settled)
	})

	t.Run("history limit", func(t *testing.T) {
		for _, img := range []string{"busybox:4", "busybox:5"} {
			w.update(t, ns, "db", setImage(img))
			w.waitSet(t, ns, "db", img, func(s *appsv1.StatefulSet) bool {
				return settled(s) && s.Status.UpdateRevision != first
			})
		}
		// The live revision and revisionHistoryLimit 2 others.
		controlplanetest.Eventually(t, wait, "3 revisions", func() bool { return len(w.revisions(t, ns)) == 3 })
		cur := w.get(t, ns, "db").Status.UpdateRevision
		var nums []int64
		for _, r := range w.revisions(t, ns) {
			nums = append(nums, r.Revision)
			if r.Name == cur && r.Revision != 6 {
				t.Errorf("live revision %s is %d, want 6", r.Name, r.Revision)
			}
		}
		slices.Sort(nums)
		if !slices.Equal(nums, []int64{4, 5, 6}) {
			t.Errorf("revisions %v, want the 3 newest [4 5 6]", nums)
		}
	})

	t.Run("OnDelete", func(t *testing.T) {
		before := w.update(t, ns, "db", func(s *appsv1.StatefulSet) {
			s.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType}
			s.Spec.Template.Spec.Containers[0].Image = "busybox:6"
		})
		got := w.waitSet(t, ns, "db", "the new revision seen", func(s *appsv1.StatefulSet) bool {
			return s.Status.ObservedGeneration == before.Generation && s.Status.UpdateRevision != s.Status.CurrentRevision
		})
		if got.Status.UpdatedReplicas != 0 {
			t.Errorf("updatedReplicas %d with OnDelete, want 0", got.Status.UpdatedReplicas)
		}
		if err := w.env.Client.CoreV1().Pods(ns).Delete(context.Background(), "db-1", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		w.waitSet(t, ns, "db", "db-1 recreated at the update revision", func(s *appsv1.StatefulSet) bool {
			return s.Status.UpdatedReplicas == 1 && s.Status.ReadyReplicas == 3
		})
		if img := imageOf(t); img["db-1"] != "busybox:6@"+got.Status.UpdateRevision || img["db-0"] == img["db-1"] {
			t.Errorf("pods %v, want only db-1 at busybox:6", img)
		}
	})
}

// testValidation: the fields kube forbids to change are refused with its
// cause, and nothing is written.
func testValidation(t *testing.T, w *world) {
	const ns = "valid"
	w.namespace(t, ns)
	w.create(t, newSet(ns, "db", 1))
	for name, change := range map[string]func(*appsv1.StatefulSet){
		"serviceName": func(s *appsv1.StatefulSet) { s.Spec.ServiceName = "other" },
		"selector": func(s *appsv1.StatefulSet) {
			s.Spec.Selector.MatchLabels["tier"] = "x"
			s.Spec.Template.Labels["tier"] = "x"
		},
		"podManagementPolicy": func(s *appsv1.StatefulSet) { s.Spec.PodManagementPolicy = appsv1.ParallelPodManagement },
	} {
		t.Run(name, func(t *testing.T) {
			var err error
			for { // The controller's status writes conflict with ours.
				set := w.get(t, ns, "db")
				change(set)
				if _, err = w.env.Client.AppsV1().StatefulSets(ns).Update(context.Background(), set, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
					break
				}
			}
			st, ok := err.(apierrors.APIStatus)
			if !apierrors.IsInvalid(err) || !ok || st.Status().Details == nil || len(st.Status().Details.Causes) != 1 {
				t.Fatalf("update: %v, want 422 with one cause", err)
			}
			c := st.Status().Details.Causes[0]
			if c.Field != "spec" || c.Type != metav1.CauseType(field.ErrorTypeForbidden) ||
				c.Message != "Forbidden: updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden" {
				t.Errorf("cause %+v, want kube's", c)
			}
			if got := w.get(t, ns, "db"); got.Generation != 1 || got.Spec.ServiceName != "db" || got.Spec.PodManagementPolicy != appsv1.OrderedReadyPodManagement {
				t.Errorf("stored %+v after a refused update", got.Spec)
			}
		})
	}
}
