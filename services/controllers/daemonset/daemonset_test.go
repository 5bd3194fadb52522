package daemonset

import (
	"context"
	"strconv"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
)

// TestPlacement ports kube's node selector, affinity and taint tests
// (TestNodeSelectorDaemonLaunchesPods, TestTaintedNodeDaemonDoesNotLaunch...,
// TestNodeDaemonLaunchesToleratePod, TestTaintPressureNodeDaemonLaunchesPod,
// TestNodeAffinityDaemonLaunchesPods): each DaemonSet gets pods on exactly
// the nodes it should, with the node-affinity term that binds each to its
// node, and its status counts them.
func TestPlacement(t *testing.T) {
	const ns = "placement"
	env := start(t, ns)
	createNode(t, env, "plain")
	createNode(t, env, "ssd", withLabels("disk", "ssd"))
	createNode(t, env, "cordoned", withTaint(taintUnschedulable, corev1.TaintEffectNoSchedule))
	createNode(t, env, "pressure", withTaint(taintMemoryPressure, corev1.TaintEffectNoSchedule),
		withTaint(taintDiskPressure, corev1.TaintEffectNoSchedule), withTaint(taintPIDPressure, corev1.TaintEffectNoSchedule))
	createNode(t, env, "gpu", withTaint("gpu", corev1.TaintEffectNoSchedule))
	createNode(t, env, "evicting", withTaint("maintenance", corev1.TaintEffectNoExecute))
	createNode(t, env, "nonet", withTaint(taintNetworkUnavailable, corev1.TaintEffectNoSchedule))
	createNode(t, env, "unreachable", withTaint(taintUnreachable, corev1.TaintEffectNoExecute))
	everywhere := []string{"plain", "ssd", "cordoned", "pressure", "unreachable"}

	tests := []struct {
		name   string
		change func(*appsv1.DaemonSet)
		want   []string
	}{
		{"default tolerations", nil, everywhere},
		{"node selector", func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.NodeSelector = map[string]string{"disk": "ssd"} }, []string{"ssd"}},
		{"required node affinity", func(ds *appsv1.DaemonSet) {
			ds.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
					MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "disk", Operator: corev1.NodeSelectorOpDoesNotExist}},
				}}}}}
		}, []string{"plain", "cordoned", "pressure", "unreachable"}},
		{"tolerates gpu", func(ds *appsv1.DaemonSet) {
			ds.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists}}
		}, append([]string{"gpu"}, everywhere...)},
		{"host network tolerates network-unavailable", func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.HostNetwork = true },
			append([]string{"nonet"}, everywhere...)},
		{"template nodeName", func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.NodeName = "ssd" }, []string{"ssd"}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ds := newDS(ns, "ds"+strconv.Itoa(i))
			if tt.change != nil {
				tt.change(ds)
			}
			ds = createDS(t, env, ds)
			pods := waitNodes(t, env, ds, tt.want...)
			hash := currentHash(t, env, ds, "busybox:1")
			for _, p := range pods {
				if p.Spec.NodeName != ds.Spec.Template.Spec.NodeName {
					t.Errorf("pod %s has nodeName %q: the scheduler binds daemon pods", p.Name, p.Spec.NodeName)
				}
				terms := p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
				if len(terms) != 1 || len(terms[0].MatchFields) != 1 || terms[0].MatchFields[0].Key != "metadata.name" ||
					terms[0].MatchFields[0].Operator != corev1.NodeSelectorOpIn || len(terms[0].MatchExpressions) != 0 {
					t.Errorf("pod %s node affinity %+v", p.Name, terms)
				}
				if p.Labels[appsv1.DefaultDaemonSetUniqueLabelKey] != hash || p.Labels[templateGenerationLabel] != "1" {
					t.Errorf("pod %s labels %v, want hash %s and generation 1", p.Name, p.Labels, hash)
				}
				wantTol := map[string]corev1.TaintEffect{taintNotReady: corev1.TaintEffectNoExecute, taintUnreachable: corev1.TaintEffectNoExecute,
					taintDiskPressure: corev1.TaintEffectNoSchedule, taintMemoryPressure: corev1.TaintEffectNoSchedule,
					taintPIDPressure: corev1.TaintEffectNoSchedule, taintUnschedulable: corev1.TaintEffectNoSchedule}
				for _, tol := range p.Spec.Tolerations {
					if e, ok := wantTol[tol.Key]; ok && e == tol.Effect && tol.Operator == corev1.TolerationOpExists {
						delete(wantTol, tol.Key)
					}
				}
				if len(wantTol) > 0 {
					t.Errorf("pod %s lacks tolerations %v", p.Name, wantTol)
				}
			}
			n := int32(len(tt.want))
			waitStatus(t, env, ds, "counts", func(s appsv1.DaemonSetStatus) bool {
				return s.DesiredNumberScheduled == n && s.CurrentNumberScheduled == n && s.UpdatedNumberScheduled == n &&
					s.NumberReady == 0 && s.NumberAvailable == 0 && s.NumberUnavailable == n && s.NumberMisscheduled == 0
			})
			controlplanetest.WaitForEvent(t, env, ns, ds.Name, ReasonSuccessfulCreate)
		})
	}
}

// TestNodeChanges: a new node gets its pod, a node that stops matching
// loses it (and is counted misscheduled until then), a deleted node's pod
// goes, a node tainted NoExecute is left, and one only tainted NoSchedule
// keeps its running pod (kube's TestDaemonSetRespectsTermination...,
// TestNodeShouldRunDaemonPod cases).
func TestNodeChanges(t *testing.T) {
	const ns = "nodes"
	env := start(t, ns)
	createNode(t, env, "a", withLabels("role", "agent"))
	ds := newDS(ns, "agent")
	ds.Spec.Template.Spec.NodeSelector = map[string]string{"role": "agent"}
	ds = createDS(t, env, ds)
	waitNodes(t, env, ds, "a")

	createNode(t, env, "b", withLabels("role", "agent"))
	createNode(t, env, "c", withLabels("role", "agent"))
	createNode(t, env, "other")
	waitNodes(t, env, ds, "a", "b", "c")

	updateNode(t, env, "b", func(n *corev1.Node) { delete(n.Labels, "role") })
	waitNodes(t, env, ds, "a", "c")
	if err := env.Client.CoreV1().Nodes().Delete(context.Background(), "c", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitNodes(t, env, ds, "a")

	// NoSchedule: the running pod stays, but status does not want it.
	updateNode(t, env, "a", withTaint("dedicated", corev1.TaintEffectNoSchedule))
	waitStatus(t, env, ds, "a pod on a node that should not run it", func(s appsv1.DaemonSetStatus) bool {
		return s.DesiredNumberScheduled == 0 && s.NumberMisscheduled == 1
	})
	waitNodes(t, env, ds, "a")
	// NoExecute: it goes.
	updateNode(t, env, "a", withTaint("evict", corev1.TaintEffectNoExecute))
	waitNodes(t, env, ds)
	updateNode(t, env, "b", withLabels("role", "agent"))
	waitNodes(t, env, ds, "b")
}

// TestFailedPodReplaced: a failed daemon pod is deleted with a
// FailedDaemonPod Event and replaced, a succeeded one with a
// SucceededDaemonPod Event (kube's TestDaemonKillFailedPods).
func TestFailedPodReplaced(t *testing.T) {
	const ns = "failed"
	env := start(t, ns)
	createNode(t, env, "n")
	ds := createDS(t, env, newDS(ns, "flaky"))
	pods := waitNodes(t, env, ds, "n")
	p := pods[0]
	p.Status.Phase = corev1.PodFailed
	if _, err := env.Client.CoreV1().Pods(ns).UpdateStatus(context.Background(), &p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	controlplanetest.WaitForEvent(t, env, ns, ds.Name, ReasonFailedDaemonPod)
	var second corev1.Pod
	controlplanetest.Eventually(t, wait, "a replacement pod", func() bool {
		live := daemonPods(t, env, ns, ds.UID)
		if len(live) == 1 && live[0].UID != p.UID && live[0].Status.Phase != corev1.PodFailed {
			second = live[0]
			return true
		}
		return false
	})
	// A pod that exits 0 is replaced too, with a Normal Event.
	second.Status.Phase = corev1.PodSucceeded
	if _, err := env.Client.CoreV1().Pods(ns).UpdateStatus(context.Background(), &second, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	controlplanetest.WaitForEvent(t, env, ns, ds.Name, ReasonSucceededDaemonPod)
	controlplanetest.Eventually(t, wait, "a replacement of the succeeded pod", func() bool {
		live := daemonPods(t, env, ns, ds.UID)
		return len(live) == 1 && live[0].UID != second.UID && live[0].UID != p.UID
	})
}

// TestRollingUpdateMaxUnavailable: with maxUnavailable 2 of 5 nodes, an
// update never leaves more than 2 nodes without an available pod, and
// rolls to the end as new pods become ready (kube's
// TestDaemonSetUpdatesPodsWithMaxUnavailable).
func TestRollingUpdateMaxUnavailable(t *testing.T) {
	const ns = "rolling"
	env := start(t, ns)
	nodes := []string{"n1", "n2", "n3", "n4", "n5"}
	for _, n := range nodes {
		createNode(t, env, n)
	}
	ds := newDS(ns, "web")
	two := intstr.FromInt32(2)
	ds.Spec.UpdateStrategy = appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType,
		RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: &two}}
	ds = createDS(t, env, ds)
	waitNodes(t, env, ds, nodes...)
	readyAll(t, env, ds)
	waitStatus(t, env, ds, "all available", func(s appsv1.DaemonSetStatus) bool { return s.NumberAvailable == 5 })

	setImage(t, env, ns, ds.Name, "busybox:2")
	hash := currentHash(t, env, ds, "busybox:2")
	for done := 0; done < 5; {
		// The controller deletes up to 2 old pods and creates their
		// replacements; nothing more happens until they are ready.
		var cur []corev1.Pod
		want := min(done+2, 5)
		controlplanetest.Eventually(t, wait, "new pods on "+strconv.Itoa(want)+" nodes", func() bool {
			pods := daemonPods(t, env, ns, ds.UID)
			var old []corev1.Pod
			cur, old = byRevision(pods, hash)
			unavailable := 5 - len(old)
			for _, p := range cur {
				if !isReady(&p) {
					continue
				}
				unavailable--
			}
			if unavailable > 2 {
				t.Fatalf("%d nodes without an available pod, maxUnavailable 2", unavailable)
			}
			return len(cur) == want && len(old) == 5-want
		})
		for _, p := range cur {
			if !isReady(&p) {
				markReady(t, env, p)
			}
		}
		done = want
	}
	st := waitStatus(t, env, ds, "rolled out", func(s appsv1.DaemonSetStatus) bool {
		return s.UpdatedNumberScheduled == 5 && s.NumberAvailable == 5 && s.NumberUnavailable == 0
	})
	if st.DesiredNumberScheduled != 5 || st.CurrentNumberScheduled != 5 {
		t.Errorf("status %+v", st)
	}
	if got := podNodes(t, daemonPods(t, env, ns, ds.UID)); len(got) != 5 {
		t.Errorf("pods on %v after the rollout", got)
	}
}

// TestRollingUpdateMaxSurge: with maxSurge 1 and maxUnavailable 0, a new
// pod starts beside the old one on one node at a time, and the old one
// goes only once the new one is available (kube's
// TestDaemonSetUpdatesPodsWithMaxSurge / TestUpdateSurge...).
func TestRollingUpdateMaxSurge(t *testing.T) {
	const ns = "surge"
	env := start(t, ns)
	nodes := []string{"n1", "n2", "n3"}
	for _, n := range nodes {
		createNode(t, env, n)
	}
	ds := newDS(ns, "web")
	one, zero := intstr.FromInt32(1), intstr.FromInt32(0)
	ds.Spec.UpdateStrategy = appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType,
		RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: &zero, MaxSurge: &one}}
	ds = createDS(t, env, ds)
	waitNodes(t, env, ds, nodes...)
	readyAll(t, env, ds)
	waitStatus(t, env, ds, "all available", func(s appsv1.DaemonSetStatus) bool { return s.NumberAvailable == 3 })

	setImage(t, env, ns, ds.Name, "busybox:2")
	hash := currentHash(t, env, ds, "busybox:2")
	for i := 1; i <= 3; i++ {
		var surged corev1.Pod
		controlplanetest.Eventually(t, wait, "surge pod "+strconv.Itoa(i), func() bool {
			cur, old := byRevision(daemonPods(t, env, ns, ds.UID), hash)
			if len(cur)+len(old) > 4 {
				t.Fatalf("%d pods on 3 nodes with maxSurge 1", len(cur)+len(old))
			}
			var unready []corev1.Pod
			for _, p := range cur {
				if !isReady(&p) {
					unready = append(unready, p)
				}
			}
			if len(unready) != 1 || len(old) != 3-(i-1) {
				return false
			}
			surged = unready[0]
			return true
		})
		markReady(t, env, surged)
		controlplanetest.Eventually(t, wait, "old pod gone after surge "+strconv.Itoa(i), func() bool {
			cur, old := byRevision(daemonPods(t, env, ns, ds.UID), hash)
			ready := 0
			for _, p := range cur {
				if isReady(&p) {
					ready++
				}
			}
			// The next node may surge at once.
			return ready == i && len(old) == 3-i
		})
	}
	waitStatus(t, env, ds, "rolled out", func(s appsv1.DaemonSetStatus) bool {
		return s.UpdatedNumberScheduled == 3 && s.NumberAvailable == 3
	})
}

// TestOnDelete: a template change replaces no pod; a deleted pod comes
// back from the new template (kube's TestDaemonSetUpdatesNoTemplateChanged
// / OnDelete strategy).
func TestOnDelete(t *testing.T) {
	const ns = "ondelete"
	env := start(t, ns)
	createNode(t, env, "n1")
	createNode(t, env, "n2")
	ds := newDS(ns, "web")
	ds.Spec.UpdateStrategy = appsv1.DaemonSetUpdateStrategy{Type: appsv1.OnDeleteDaemonSetStrategyType}
	ds = createDS(t, env, ds)
	pods := waitNodes(t, env, ds, "n1", "n2")
	readyAll(t, env, ds)
	setImage(t, env, ns, ds.Name, "busybox:2")
	hash := currentHash(t, env, ds, "busybox:2")
	st := waitStatus(t, env, ds, "observed", func(s appsv1.DaemonSetStatus) bool { return s.NumberAvailable == 2 })
	if st.UpdatedNumberScheduled != 0 {
		t.Errorf("updatedNumberScheduled %d before any pod was deleted", st.UpdatedNumberScheduled)
	}
	if err := env.Client.CoreV1().Pods(ns).Delete(context.Background(), pods[0].Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	controlplanetest.Eventually(t, wait, "the deleted pod recreated from the new template", func() bool {
		cur, old := byRevision(daemonPods(t, env, ns, ds.UID), hash)
		return len(cur) == 1 && len(old) == 1 && old[0].UID == pods[1].UID
	})
	waitStatus(t, env, ds, "one updated", func(s appsv1.DaemonSetStatus) bool { return s.UpdatedNumberScheduled == 1 })
}

// TestHistory: each template gets a ControllerRevision with increasing
// numbers; going back to an old template renumbers its revision instead
// of making a new one; revisionHistoryLimit prunes old revisions no pod
// runs (kube's TestDaemonSetControllerRevisions / cleanupHistory); and
// deleting the DaemonSet takes its pods and revisions with it (the
// garbage collector).
func TestHistory(t *testing.T) {
	const ns = "history"
	env := start(t, ns)
	createNode(t, env, "n")
	ds := newDS(ns, "web")
	limit := int32(1)
	ds.Spec.RevisionHistoryLimit = &limit
	ds = createDS(t, env, ds)
	waitNodes(t, env, ds, "n")
	first := currentHash(t, env, ds, "busybox:1")

	roll := func(image string) string {
		t.Helper()
		setImage(t, env, ns, ds.Name, image)
		hash := currentHash(t, env, ds, image)
		controlplanetest.Eventually(t, wait, "the pod on "+image, func() bool {
			pods := daemonPods(t, env, ns, ds.UID)
			if len(pods) == 1 && !isReady(&pods[0]) {
				markReady(t, env, pods[0])
			}
			return len(pods) == 1 && pods[0].Labels[appsv1.DefaultDaemonSetUniqueLabelKey] == hash
		})
		return hash
	}
	roll("busybox:2")
	roll("busybox:3")
	controlplanetest.Eventually(t, wait, "history pruned to the limit", func() bool {
		revs := revisions(t, env, ds)
		return len(revs) == 2 && revs[0].Revision == 2 && revs[1].Revision == 3
	})
	// Back to the first template: a fresh revision 4 (the first was
	// pruned) with the first one's hash.
	if back := roll("busybox:1"); back != first {
		t.Errorf("hash of the first template again %q, want %q", back, first)
	}
	// Back to busybox:3, which is kept: renumbered, not recreated.
	revs := revisions(t, env, ds)
	three := revs[len(revs)-2]
	roll("busybox:3")
	controlplanetest.Eventually(t, wait, "busybox:3 renumbered", func() bool {
		revs := revisions(t, env, ds)
		last := revs[len(revs)-1]
		return last.UID == three.UID && last.Revision == 5 && len(revs) == 2
	})

	if err := env.Client.AppsV1().DaemonSets(ns).Delete(context.Background(), ds.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	controlplanetest.Eventually(t, wait, "pods and revisions collected", func() bool {
		return len(daemonPods(t, env, ns, ds.UID)) == 0 && len(revisions(t, env, ds)) == 0
	})
}

// TestCollision: a revision name taken by another template raises
// status.collisionCount and the DaemonSet's revision takes the next name.
func TestCollision(t *testing.T) {
	const ns = "collision"
	env := start(t, ns)
	// The name the revision would get: the hash of the defaulted
	// template, learned from a dry run.
	ds, err := env.Client.AppsV1().DaemonSets(ns).Create(context.Background(), newDS(ns, "web"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err != nil {
		t.Fatal(err)
	}
	hash := computeHashFor(ds, nil)
	squat := &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-" + hash},
		Data: rawJSON(`{"other":1}`), Revision: 1}
	if _, err := env.Client.AppsV1().ControllerRevisions(ns).Create(context.Background(), squat, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ds = createDS(t, env, newDS(ns, "web"))
	st := waitStatus(t, env, ds, "collision counted", func(s appsv1.DaemonSetStatus) bool {
		return s.CollisionCount != nil && *s.CollisionCount == 1
	})
	one := int32(1)
	want := computeHashFor(ds, &one)
	controlplanetest.Eventually(t, wait, "the revision under the next name", func() bool {
		revs := revisions(t, env, ds)
		return len(revs) == 1 && revs[0].Name == "web-"+want
	})
	if _, err := env.Client.AppsV1().ControllerRevisions(ns).Get(context.Background(), squat.Name, metav1.GetOptions{}); err != nil {
		t.Errorf("the squatting revision: %v", err)
	}
	if st.DesiredNumberScheduled != 0 {
		t.Errorf("desired %d without nodes", st.DesiredNumberScheduled)
	}
}

// TestAdoptAndRelease: a matching orphan on a node is adopted instead of
// a new pod being made; a pod whose labels stop matching is released and
// replaced (kube's TestDaemonSetAdoptsOrphans and the controller ref
// manager's tests).
func TestAdoptAndRelease(t *testing.T) {
	const ns = "adopt"
	env := start(t, ns)
	createNode(t, env, "n1")
	orphan := controlplanetest.CreatePod(t, env, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "orphan", Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "c", Image: "busybox:1"}}},
	})
	// OnDelete: with RollingUpdate the adopted pod, of no known revision
	// and not ready, would be replaced at once, as kube does.
	ds := newDS(ns, "web")
	ds.Spec.UpdateStrategy = appsv1.DaemonSetUpdateStrategy{Type: appsv1.OnDeleteDaemonSetStrategyType}
	ds = createDS(t, env, ds)
	controlplanetest.Eventually(t, wait, "the orphan adopted", func() bool {
		p := controlplanetest.GetPod(t, env, ns, "orphan")
		ref := metav1.GetControllerOf(p)
		return ref != nil && ref.UID == ds.UID
	})
	waitStatus(t, env, ds, "the adopted pod counted", func(s appsv1.DaemonSetStatus) bool { return s.CurrentNumberScheduled == 1 })
	if pods := daemonPods(t, env, ns, ds.UID); len(pods) != 1 || pods[0].UID != orphan.UID {
		t.Fatalf("daemon pods %v, want only the adopted orphan", podNodes(t, pods))
	}

	for {
		p := controlplanetest.GetPod(t, env, ns, "orphan")
		p.Labels = map[string]string{"app": "other"}
		_, err := env.Client.CoreV1().Pods(ns).Update(context.Background(), p, metav1.UpdateOptions{})
		if err == nil {
			break
		}
		if !apierrors.IsConflict(err) {
			t.Fatal(err)
		}
	}
	controlplanetest.Eventually(t, wait, "the relabelled pod released", func() bool {
		return metav1.GetControllerOf(controlplanetest.GetPod(t, env, ns, "orphan")) == nil
	})
	pods := waitNodes(t, env, ds, "n1")
	if pods[0].UID == orphan.UID {
		t.Fatal("the released pod still counts as the DaemonSet's")
	}
}
