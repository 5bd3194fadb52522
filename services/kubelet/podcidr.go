package kubelet

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// AwaitPodCIDR returns the pod CIDR the control plane gives node (the node
// IPAM controller sets spec.podCIDR), creating the Node first if it does
// not exist yet: a real node's CNI configuration needs its subnet before
// the runtime starts. Run then takes the Node over and fills in its status.
func AwaitPodCIDR(ctx context.Context, client kubernetes.Interface, node string) (string, error) {
	nodes := client.CoreV1().Nodes()
	_, err := nodes.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("kubelet: create node %s: %w", node, err)
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		n, err := nodes.Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return "", fmt.Errorf("kubelet: read node %s: %w", node, err)
		}
		if n.Spec.PodCIDR != "" {
			return n.Spec.PodCIDR, nil
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("kubelet: node %s has no pod CIDR yet (is the controller-manager's nodeipam running?): %w", node, ctx.Err())
		case <-tick.C:
		}
	}
}
