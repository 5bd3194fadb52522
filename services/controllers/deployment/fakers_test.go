package deployment

import (
	"context"
	"fmt"
	"sort"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/cairn-dev/cairn/events/consumer"
	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
)

// fakeReplicaSets is a test-only ReplicaSet controller: it creates and
// deletes pods to match spec.replicas (deleting unready, then newest pods
// first) and writes status (replicas, readyReplicas, availableReplicas with
// minReadySeconds, observedGeneration) computed from the pods it saw before
// acting, as kube's does. After every create or delete it waits for its
// cache to see the change, instead of kube's expectations.
type fakeReplicaSets struct {
	client kubernetes.Interface
	rss    *consumer.Cache[*appsv1.ReplicaSet]
	pods   *consumer.Cache[*corev1.Pod]
	ctrl   *consumer.Controller
}

func newFakeReplicaSets(cfg *rest.Config, env *controlplanetest.Env) (*fakeReplicaSets, error) {
	client, err := kubernetes.NewForConfig(consumer.WrapConfig(cfg))
	if err != nil {
		return nil, err
	}
	f := &fakeReplicaSets{client: client}
	if f.rss, err = consumer.NewCache(consumer.CacheConfig[*appsv1.ReplicaSet]{Resource: replicaSetsGVR, Config: cfg, JS: env.JS}); err != nil {
		return nil, err
	}
	if f.pods, err = consumer.NewCache(consumer.CacheConfig[*corev1.Pod]{Resource: podsGVR, Config: cfg, JS: env.JS}); err != nil {
		return nil, err
	}
	if f.ctrl, err = consumer.NewController(consumer.ControllerConfig{
		Name: "fake-replicaset", Reconciler: f, Workers: 4, WaitFor: []consumer.Syncer{f.rss, f.pods},
	}); err != nil {
		return nil, err
	}
	consumer.Watch(f.rss, f.ctrl, nil)
	consumer.Watch(f.pods, f.ctrl, consumer.OwnerKeys[*corev1.Pod]("ReplicaSet"))
	return f, nil
}

func (f *fakeReplicaSets) Run(ctx context.Context) error {
	return consumer.RunAll(ctx, f.rss, f.pods, f.ctrl)
}

func (f *fakeReplicaSets) Reconcile(ctx context.Context, req consumer.Request) (consumer.Result, error) {
	ns, name := req.NamespaceName()
	rs, ok := f.rss.Get(ns, name)
	if !ok || rs.DeletionTimestamp != nil {
		return consumer.Result{}, nil
	}
	var pods []*corev1.Pod
	for _, p := range f.pods.ByIndex(consumer.IndexOwner, string(rs.UID)) {
		if p.DeletionTimestamp == nil {
			pods = append(pods, p)
		}
	}
	st, requeue := fakeStatus(rs, pods, time.Now())
	diff := len(pods) - int(*rs.Spec.Replicas)
	switch {
	case diff < 0:
		for range -diff {
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{
					Namespace: ns, GenerateName: rs.Name + "-", Labels: rs.Spec.Template.Labels,
					OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(rs, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))},
				},
				Spec: rs.Spec.Template.Spec,
			}
			out, err := f.client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
			if err != nil {
				return consumer.Result{}, fmt.Errorf("create pod: %w", err)
			}
			f.await(ctx, func() bool { _, ok := f.pods.Get(ns, out.Name); return ok })
		}
	case diff > 0:
		sort.SliceStable(pods, func(i, j int) bool {
			if podReady(pods[i]) != podReady(pods[j]) {
				return !podReady(pods[i])
			}
			return pods[i].Name > pods[j].Name
		})
		for _, p := range pods[:diff] {
			if err := f.client.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil {
				return consumer.Result{}, fmt.Errorf("delete pod: %w", err)
			}
			f.await(ctx, func() bool { _, ok := f.pods.Get(ns, p.Name); return !ok })
		}
	}
	if !apiequality.Semantic.DeepEqual(rs.Status, st) {
		cp := rs.DeepCopy()
		cp.Status = st
		if _, err := f.client.AppsV1().ReplicaSets(ns).UpdateStatus(ctx, cp, metav1.UpdateOptions{}); err != nil {
			return consumer.Result{}, fmt.Errorf("update status: %w", err)
		}
	}
	return consumer.Result{RequeueAfter: requeue}, nil
}

func (f *fakeReplicaSets) await(ctx context.Context, cond func() bool) {
	deadline := time.Now().Add(10 * time.Second)
	for !cond() && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(5 * time.Millisecond)
	}
}

func fakeStatus(rs *appsv1.ReplicaSet, pods []*corev1.Pod, now time.Time) (appsv1.ReplicaSetStatus, time.Duration) {
	st := appsv1.ReplicaSetStatus{Replicas: int32(len(pods)), FullyLabeledReplicas: int32(len(pods)), ObservedGeneration: rs.Generation}
	var requeue time.Duration
	minReady := time.Duration(rs.Spec.MinReadySeconds) * time.Second
	for _, p := range pods {
		for _, c := range p.Status.Conditions {
			if c.Type != corev1.PodReady || c.Status != corev1.ConditionTrue {
				continue
			}
			st.ReadyReplicas++
			if since := now.Sub(c.LastTransitionTime.Time); since >= minReady {
				st.AvailableReplicas++
			} else if left := minReady - since + 100*time.Millisecond; requeue == 0 || left < requeue {
				requeue = left
			}
		}
	}
	return st, requeue
}
