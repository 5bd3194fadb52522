package gc

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/events/consumer"
	"github.com/cairn-dev/cairn/services/apiserver"
	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
)

// TestGarbageCollector runs the collector on a real control plane and
// deletes owners with each propagation policy, through client-go and
// through kubectl. Each case has its own namespace.
func TestGarbageCollector(t *testing.T) { testGarbageCollector(t, start(t, false)) }

// TestGarbageCollectorSharedCaches runs the same cases with the collector
// reading pods and ReplicaSets from typed caches it shares, as in the
// controller manager.
func TestGarbageCollectorSharedCaches(t *testing.T) { testGarbageCollector(t, start(t, true)) }

// TestGarbageCollectorPartitioned runs them with two collectors that
// split the keys, each following only the pods of its own partitions, as
// scaled-out controller-manager replicas do: a pod is in one collector's
// cache, and an owner's dependents may be in the other's.
func TestGarbageCollectorPartitioned(t *testing.T) { testGarbageCollector(t, startPartitioned(t)) }

func testGarbageCollector(t *testing.T, env *controlplanetest.Env) {
	ctx := context.Background()
	cms := func(ns string) interface {
		Delete(context.Context, string, metav1.DeleteOptions) error
	} {
		return env.Client.CoreV1().ConfigMaps(ns)
	}

	t.Run("background", func(t *testing.T) {
		ns := "bg"
		mkNamespace(t, env, ns)
		owner := createCM(t, env, ns, "owner")
		dep := createCM(t, env, ns, "dep", cmRef(owner))
		grand := createCM(t, env, ns, "grand", cmRef(dep))
		rs := createRS(t, env, ns, "rs")
		pod := createPod(t, env, ns, "rs-pod", nil, rsRef(rs, true))

		deleteWith(t, cms(ns).Delete(ctx, owner.Name, metav1.DeleteOptions{}))
		eventually(t, timeout, "dep to be collected", cmGone(env, ns, dep.Name))
		eventually(t, timeout, "grand (dependent of dep) to be collected", cmGone(env, ns, grand.Name))
		deleteWith(t, env.Client.AppsV1().ReplicaSets(ns).Delete(ctx, rs.Name, policy(metav1.DeletePropagationBackground)))
		eventually(t, timeout, "the pod of the replicaset to be collected", podGone(env, ns, pod.Name))

		// The collector's delete is caused by the owner's delete.
		cause := deleteEvent(t, env, "configmaps", ns, owner.Name)
		ev := deleteEvent(t, env, "configmaps", ns, dep.Name)
		if ev.CausationID != cause.ID || ev.CorrelationID != cause.CorrelationID || ev.Actor.User != apiserver.UserControllers {
			t.Errorf("dependent's delete: causation %q correlation %q actor %q; want %q %q %q",
				ev.CausationID, ev.CorrelationID, ev.Actor.User, cause.ID, cause.CorrelationID, apiserver.UserControllers)
		}
	})

	t.Run("foreground", func(t *testing.T) {
		ns := "fg"
		mkNamespace(t, env, ns)
		rs := createRS(t, env, ns, "rs")
		// held keeps the owner: it blocks, and a finalizer keeps it.
		held := createPod(t, env, ns, "held", []string{"test.cairn.dev/hold"}, rsRef(rs, true))
		free := createPod(t, env, ns, "free", nil, rsRef(rs, true))
		loose := createCM(t, env, ns, "loose", ref("apps/v1", "ReplicaSet", rs, false))
		// A blocking dependent with blocking dependents of its own: the
		// owner waits for the whole subtree.
		child := createCM(t, env, ns, "child", ref("apps/v1", "ReplicaSet", rs, true))
		grandchild := createPod(t, env, ns, "grandchild", []string{"test.cairn.dev/hold"}, ref("v1", "ConfigMap", child, true))

		deleteWith(t, env.Client.AppsV1().ReplicaSets(ns).Delete(ctx, rs.Name, policy(metav1.DeletePropagationForeground)))
		eventually(t, timeout, "free to be collected", podGone(env, ns, free.Name))
		eventually(t, timeout, "loose (not blocking) to be collected", cmGone(env, ns, loose.Name))
		eventually(t, timeout, "held to be deleting", func() bool { return getPod(t, env, ns, held.Name).DeletionTimestamp != nil })
		got, err := env.Client.AppsV1().ReplicaSets(ns).Get(ctx, rs.Name, metav1.GetOptions{})
		if err != nil || got.DeletionTimestamp == nil || !slices.Contains(got.Finalizers, metav1.FinalizerDeleteDependents) {
			t.Fatalf("owner while a blocking dependent remains: %v %+v, want it kept with deletionTimestamp and %q", err, got.ObjectMeta, metav1.FinalizerDeleteDependents)
		}
		err = retry.RetryOnConflict(retry.DefaultBackoff, func() error {
			p := getPod(t, env, ns, held.Name)
			p.Finalizers = nil
			_, err := env.Client.CoreV1().Pods(ns).Update(ctx, p, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		eventually(t, timeout, "held to go", podGone(env, ns, held.Name))
		eventually(t, timeout, "child to be deleting in the foreground", func() bool {
			c := getCM(t, env, ns, child.Name)
			return c.DeletionTimestamp != nil && slices.Contains(c.Finalizers, metav1.FinalizerDeleteDependents)
		})
		if rsGone(env, ns, rs.Name)() {
			t.Fatal("the owner went before its grandchild")
		}
		err = retry.RetryOnConflict(retry.DefaultBackoff, func() error {
			p := getPod(t, env, ns, grandchild.Name)
			p.Finalizers = nil
			_, err := env.Client.CoreV1().Pods(ns).Update(ctx, p, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		eventually(t, timeout, "child to go", cmGone(env, ns, child.Name))
		eventually(t, timeout, "the owner to go", rsGone(env, ns, rs.Name))
	})

	t.Run("foreground, dependent of another controller", func(t *testing.T) {
		// The pod belongs to rs (a solid owner) and blocks own. When the
		// collectors split keys, the one that owns own's key is made not
		// to be the one that follows rs's pods: it must still wait for the
		// pod's reference to own to go.
		ns := "fgx"
		mkNamespace(t, env, ns)
		rs := createRS(t, env, ns, "rs")
		name := "own-0"
		for i := 1; events.KeyHash(ns+"/"+name)%2 == events.KeyHash(ns+"/"+rs.Name)%2; i++ {
			name = fmt.Sprint("own-", i)
		}
		own := createCM(t, env, ns, name)
		pod := createPod(t, env, ns, "pod", nil, rsRef(rs, false), ref("v1", "ConfigMap", own, true))

		deleteWith(t, cms(ns).Delete(ctx, own.Name, policy(metav1.DeletePropagationForeground)))
		eventually(t, timeout, "the owner to go", cmGone(env, ns, own.Name))
		if refs := getPod(t, env, ns, pod.Name).OwnerReferences; len(refs) != 1 || refs[0].UID != rs.UID {
			t.Errorf("when the owner went, the pod had %v; want only its reference to rs", refs)
		}
	})

	t.Run("orphan", func(t *testing.T) {
		ns := "orphan"
		mkNamespace(t, env, ns)
		owner := createCM(t, env, ns, "owner")
		other := createCM(t, env, ns, "other")
		a := createCM(t, env, ns, "a", cmRef(owner))
		b := createCM(t, env, ns, "b", cmRef(owner), cmRef(other))

		deleteWith(t, cms(ns).Delete(ctx, owner.Name, policy(metav1.DeletePropagationOrphan)))
		eventually(t, timeout, "the owner to go", cmGone(env, ns, owner.Name))
		if refs := getCM(t, env, ns, a.Name).OwnerReferences; len(refs) != 0 {
			t.Errorf("a keeps %v", refs)
		}
		if refs := getCM(t, env, ns, b.Name).OwnerReferences; len(refs) != 1 || refs[0].UID != other.UID {
			t.Errorf("b has %v, want only its reference to other", refs)
		}
		// Orphans stay orphans.
		time.Sleep(500 * time.Millisecond)
		getCM(t, env, ns, a.Name)
	})

	t.Run("two owners", func(t *testing.T) {
		ns := "two"
		mkNamespace(t, env, ns)
		o1 := createCM(t, env, ns, "o1")
		o2 := createCM(t, env, ns, "o2")
		dep := createCM(t, env, ns, "dep", cmRef(o1), cmRef(o2))
		lone := createCM(t, env, ns, "lone", cmRef(o1))

		deleteWith(t, cms(ns).Delete(ctx, o1.Name, metav1.DeleteOptions{}))
		eventually(t, timeout, "lone to be collected", cmGone(env, ns, lone.Name))
		// The dangling reference to o1 is removed; dep stays for o2.
		eventually(t, timeout, "dep's reference to o1 to go", func() bool { return len(getCM(t, env, ns, dep.Name).OwnerReferences) == 1 })
		if refs := getCM(t, env, ns, dep.Name).OwnerReferences; refs[0].UID != o2.UID {
			t.Fatalf("dep has %v, want its reference to o2", refs)
		}
		deleteWith(t, cms(ns).Delete(ctx, o2.Name, metav1.DeleteOptions{}))
		eventually(t, timeout, "dep to be collected", cmGone(env, ns, dep.Name))
	})

	t.Run("absent at start", func(t *testing.T) {
		// A dependent whose owner never existed (or went before the
		// collector saw it) is collected too, after a live check.
		ns := "absent"
		mkNamespace(t, env, ns)
		ghost := createCM(t, env, ns, "ghost")
		deleteWith(t, cms(ns).Delete(ctx, ghost.Name, metav1.DeleteOptions{}))
		dep := createCM(t, env, ns, "dep", cmRef(ghost))
		eventually(t, timeout, "dep of a missing owner to be collected", cmGone(env, ns, dep.Name))
	})

	t.Run("kubectl", func(t *testing.T) {
		ns := "kc"
		mkNamespace(t, env, ns)
		kc := tlsKubeconfig(t, env)
		for _, tt := range []struct {
			cascade string
			// kept: the pod survives (orphan), with no reference.
			kept bool
		}{
			{cascade: "background"},
			{cascade: "foreground"},
			{cascade: "orphan", kept: true},
		} {
			t.Run(tt.cascade, func(t *testing.T) {
				rs := createRS(t, env, ns, "rs-"+tt.cascade)
				pod := createPod(t, env, ns, "pod-"+tt.cascade, nil, rsRef(rs, true))
				kubectl(t, kc, "delete", "-n", ns, "replicaset", rs.Name, "--cascade="+tt.cascade, "--timeout=60s")
				eventually(t, timeout, "the replicaset to go", rsGone(env, ns, rs.Name))
				if !tt.kept {
					eventually(t, timeout, "the pod to be collected", podGone(env, ns, pod.Name))
					return
				}
				eventually(t, timeout, "the pod to be orphaned", func() bool { return len(getPod(t, env, ns, pod.Name).OwnerReferences) == 0 })
				time.Sleep(300 * time.Millisecond)
				if _, err := env.Client.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
					t.Error("the orphaned pod was deleted")
				}
			})
		}
	})
}

// TestLaggingCache: an owner deleted in the foreground or with orphan
// waits for dependents that a cache has not shown yet. The pod cache is
// held up (its handler blocks on a gate pod) while a dependent pod is
// created and then its owner deleted: the owner must still be there when
// the cache is let go. Then the dependent is collected (foreground) or
// kept without its reference (orphan); before, the owner went at once, and
// an orphan was collected as a dependent of a missing owner.
func TestLaggingCache(t *testing.T) {
	env := controlplanetest.Start(t)
	ctx := context.Background()
	m := newManager(t, env)
	pods := sharedCache[*corev1.Pod](t, m, corev1.SchemeGroupVersion.WithResource("pods"), nil)
	release := make(chan struct{})
	pods.AddHandler(consumer.Handler[*corev1.Pod]{OnAdd: func(p *corev1.Pod, ev *events.Event) {
		if ev != nil && strings.HasPrefix(p.Name, "gate-") {
			<-release
		}
	}})
	c := runCollector(t, m, Options{})
	t.Cleanup(func() { close(release) }) // runs before the manager is stopped
	var cms consumer.MetaCache
	for _, r := range c.resources {
		if r.gvr.Resource == "configmaps" {
			cms = r.cache
		}
	}
	mkNamespace(t, env, "lag")

	for _, tt := range []struct {
		policy metav1.DeletionPropagation
		block  bool
	}{
		{policy: metav1.DeletePropagationForeground, block: true},
		{policy: metav1.DeletePropagationOrphan},
	} {
		t.Run(string(tt.policy), func(t *testing.T) {
			name := strings.ToLower(string(tt.policy))
			own := createCM(t, env, "lag", "own-"+name)
			createPod(t, env, "lag", "gate-"+name, nil)
			let := sync.OnceFunc(func() { release <- struct{}{} })
			t.Cleanup(let) // if the case fails before
			pod := createPod(t, env, "lag", "dep-"+name, nil, ref("v1", "ConfigMap", own, tt.block))
			deleteWith(t, env.Client.CoreV1().ConfigMaps("lag").Delete(ctx, own.Name, policy(tt.policy)))
			eventually(t, timeout, "the collector to see the owner deleting", func() bool {
				o, ok := cms.Get("lag", own.Name)
				return ok && o.GetDeletionTimestamp() != nil || cmGone(env, "lag", own.Name)()
			})
			// Time for a reconcile that would not wait.
			time.Sleep(500 * time.Millisecond)
			if got := getCM(t, env, "lag", own.Name); len(got.Finalizers) != 1 {
				t.Fatalf("the owner has finalizers %v while its dependent is not in the cache", got.Finalizers)
			}
			let()
			eventually(t, timeout, "the owner to go", cmGone(env, "lag", own.Name))
			if tt.block {
				eventually(t, timeout, "the dependent to be collected", podGone(env, "lag", pod.Name))
				return
			}
			if refs := getPod(t, env, "lag", pod.Name).OwnerReferences; len(refs) != 0 {
				t.Errorf("the orphan keeps %v", refs)
			}
			time.Sleep(300 * time.Millisecond)
			if podGone(env, "lag", pod.Name)() {
				t.Error("the orphan was collected")
			}
		})
	}
}
