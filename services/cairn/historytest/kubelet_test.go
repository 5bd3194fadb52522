package historytest

import (
	"context"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	hist "github.com/cairn-dev/cairn/projections/history/historytest"
)

// nodeName is the node the test registers and stands in for.
const nodeName = "node-1"

// registerNode creates a Ready node with room for the test's pods, so that
// the scheduler of `cairn up` binds them there.
func registerNode(t *testing.T, cs kubernetes.Interface) {
	t.Helper()
	room := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"),
		corev1.ResourceMemory: resource.MustParse("16Gi"), corev1.ResourcePods: resource.MustParse("110")}
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: nodeName, Labels: map[string]string{"kubernetes.io/hostname": nodeName}},
		Status: corev1.NodeStatus{Capacity: room, Allocatable: room,
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue,
				LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now(), Reason: "KubeletReady"}}},
	}
	created, err := cs.CoreV1().Nodes().Create(t.Context(), n, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("register node: %v", err)
	}
	n.ResourceVersion = created.ResourceVersion
	if _, err := cs.CoreV1().Nodes().UpdateStatus(t.Context(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("node status: %v", err)
	}
}

// kubelet stands in for the kubelet of nodeName, through the API with the
// admin kubeconfig: it reports the pods bound to the node Running and
// Ready (at most limit of them in all, so the test can hold a rollout
// half way) and finishes their graceful deletes. An informer with a short
// resync retries what failed, across restarts of cairn.
type kubelet struct {
	client kubernetes.Interface
	mu     sync.Mutex
	limit  int
	taken  map[types.UID]bool // pods it has started or is starting
}

// startKubelet runs a kubelet with the kubeconfig until cleanup.
func startKubelet(t *testing.T, kubeconfig string, limit int) *kubelet {
	t.Helper()
	cs, err := clientFor(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	k := &kubelet{client: cs, limit: limit, taken: map[types.UID]bool{}}
	ctx, cancel := context.WithCancel(context.Background())
	f := informers.NewSharedInformerFactory(cs, time.Second)
	_, err = f.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { k.sync(ctx, o.(*corev1.Pod)) },
		UpdateFunc: func(_, o any) { k.sync(ctx, o.(*corev1.Pod)) },
	})
	if err != nil {
		t.Fatal(err)
	}
	f.Start(ctx.Done())
	t.Cleanup(func() {
		cancel()
		f.Shutdown()
	})
	return k
}

// allow sets how many pods the kubelet may have started in all.
func (k *kubelet) allow(n int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.limit = n
}

// take reports whether the kubelet may start p.
func (k *kubelet) take(uid types.UID) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.taken[uid] {
		return true
	}
	if len(k.taken) >= k.limit {
		return false
	}
	k.taken[uid] = true
	return true
}

// sync acts on one pod; a write that fails (cairn down, a conflict with a
// newer version) is retried on the next resync.
func (k *kubelet) sync(ctx context.Context, p *corev1.Pod) {
	if p.Spec.NodeName != nodeName {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	pods := k.client.CoreV1().Pods(p.Namespace)
	switch {
	case p.DeletionTimestamp != nil:
		zero := int64(0)
		_ = pods.Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero,
			Preconditions: &metav1.Preconditions{UID: &p.UID}})
	case p.Status.Phase != corev1.PodRunning && k.take(p.UID):
		p = p.DeepCopy()
		hist.SetRunning(p)
		_, _ = pods.UpdateStatus(ctx, p, metav1.UpdateOptions{})
	}
}
