package statefulset

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

// podsOf is the pods set controls after this round (kube's
// getPodsForStatefulSet, package podclaim): its own pods that still match
// its selector and are named as its members, plus the orphans of that
// kind, adopted now; its pods that no longer match are released.
func (c *Controller) podsOf(ctx context.Context, set *appsv1.StatefulSet, sel labels.Selector) ([]*corev1.Pod, error) {
	candidates := c.pods.ByIndex(consumer.IndexOwner, string(set.UID))
	if set.DeletionTimestamp == nil {
		candidates = append(candidates, c.pods.ByIndex(podclaim.OrphanIndex, set.Namespace)...)
	}
	owner := podclaim.Owner{Object: set, Kind: controllerKind, Selector: sel, CanAdopt: c.canAdopt(set),
		Filter: func(p *corev1.Pod) bool { return isMemberOf(set, p) }}
	pods, err := podclaim.Claimer{Client: c.client, Log: c.log}.Claim(ctx, owner, candidates)
	if err != nil {
		return nil, fmt.Errorf("statefulset: %s/%s: claim pods: %w", set.Namespace, set.Name, err)
	}
	return pods, nil
}

// canAdopt is whether set, read from the apiserver, may adopt pods and
// revisions (podclaim.Recheck).
func (c *Controller) canAdopt(set *appsv1.StatefulSet) func(ctx context.Context) (bool, error) {
	return podclaim.Recheck(set, func(ctx context.Context) (metav1.Object, error) {
		return c.client.AppsV1().StatefulSets(set.Namespace).Get(ctx, set.Name, metav1.GetOptions{})
	})
}
