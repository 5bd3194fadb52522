package historytest

import (
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/cairn-dev/cairn/services/cairn/cairntest"
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
	if _, err := cs.CoreV1().Nodes().Create(t.Context(), n, metav1.CreateOptions{}); err != nil {
		t.Fatalf("register node: %v", err)
	}
	// The node IPAM controller sets spec.podCIDR at the same time.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := cs.CoreV1().Nodes().Get(t.Context(), nodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Status = n.Status
		_, err = cs.CoreV1().Nodes().UpdateStatus(t.Context(), cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("node status: %v", err)
	}
}

// kubelet stands in for the kubelet of nodeName (cairntest.StartKubelet):
// it reports the pods bound to the node Running and Ready, at most limit of
// them in all, so the test can hold a rollout half way, and finishes their
// graceful deletes; it retries what failed across restarts of cairn.
type kubelet struct {
	mu    sync.Mutex
	limit int
	taken map[types.UID]bool // pods it has started or is starting
}

// startKubelet runs a kubelet with the kubeconfig until cleanup.
func startKubelet(t *testing.T, kubeconfig string, limit int) *kubelet {
	t.Helper()
	k := &kubelet{limit: limit, taken: map[types.UID]bool{}}
	cairntest.StartKubelet(t, kubeconfig, cairntest.KubeletConfig{Node: nodeName, FinishDeletes: true,
		Admit: func(p *corev1.Pod) bool { return k.take(p.UID) }})
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
