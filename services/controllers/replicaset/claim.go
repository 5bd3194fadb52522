package replicaset

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/cairn-dev/cairn/events/consumer"
	"github.com/cairn-dev/cairn/services/controllers/podclaim"
)

// claimPods returns the pods rs controls after this round: the ones it
// controlled and still match sel, and the orphans that match and that it
// adopts now. Controlled pods that stopped matching are released (kube's
// PodControllerRefManager.ClaimPods, package podclaim). A ReplicaSet being
// deleted neither adopts nor releases.
func (c *Controller) claimPods(ctx context.Context, rs *appsv1.ReplicaSet, sel labels.Selector) ([]*corev1.Pod, error) {
	// Only rs's own pods and the orphans can be claimed: pods of other
	// controllers are not even looked at (a namespace with many
	// ReplicaSets would make every round scan them all).
	candidates := c.pods.ByIndex(consumer.IndexOwner, string(rs.UID))
	if rs.DeletionTimestamp == nil {
		candidates = append(candidates, c.pods.ByIndex(podclaim.OrphanIndex, rs.Namespace)...)
	}
	// The recheck reads rs from the apiserver, not the cache.
	fresh := func(ctx context.Context) (metav1.Object, error) {
		return c.client.AppsV1().ReplicaSets(rs.Namespace).Get(ctx, rs.Name, metav1.GetOptions{})
	}
	owner := podclaim.Owner{Object: rs, Kind: controllerKind, Selector: sel, CanAdopt: podclaim.Recheck(rs, fresh)}
	pods, err := podclaim.Claimer{Client: c.client, Log: c.log}.Claim(ctx, owner, candidates)
	if err != nil {
		return nil, fmt.Errorf("replicaset: %s/%s: claim pods: %w", rs.Namespace, rs.Name, err)
	}
	return pods, nil
}
