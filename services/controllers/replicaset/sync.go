package replicaset

import (
	"context"
	"errors"
	"fmt"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cairn-dev/cairn/events/consumer"
	"github.com/cairn-dev/cairn/services/controllers/podcontrol"
	"github.com/cairn-dev/cairn/services/eventrecord"
)

var _ consumer.Reconciler = (*Controller)(nil)

// Reconcile runs one round for the ReplicaSet req.Key (see the package
// documentation). It is called by the controller's workers; it is exported
// to satisfy consumer.Reconciler. An error means retry with back-off; the
// cause in ctx is carried by every write.
func (c *Controller) Reconcile(ctx context.Context, req consumer.Request) (consumer.Result, error) {
	ns, name := req.NamespaceName()
	rs, ok := c.rsets.Get(ns, name)
	if !ok {
		c.expect.Forget(req.Key)
		return consumer.Result{}, nil
	}
	sel, err := metav1.LabelSelectorAsSelector(rs.Spec.Selector)
	if err != nil {
		// Validation rejects such selectors; nothing to retry.
		return consumer.Result{}, consumer.TerminalError(fmt.Errorf("replicaset: %s: selector: %w", req.Key, err))
	}
	// Check expectations before reading the pods: pods seen after the
	// check are at least as new as the expectations say.
	satisfied, expireIn := c.expect.Satisfied(req.Key)

	pods, err := c.claimPods(ctx, rs, sel)
	if err != nil {
		return consumer.Result{}, err
	}
	var active []*corev1.Pod
	for _, p := range pods {
		if isActive(p) {
			active = append(active, p)
		}
	}

	var manageErr error
	if satisfied && rs.DeletionTimestamp == nil {
		manageErr = c.manageReplicas(ctx, req.Key, rs, active)
	}

	now := c.now()
	status, availableIn := calculateStatus(rs, pods, active, manageErr, now)
	if err := c.updateStatus(ctx, rs, status); err != nil {
		return consumer.Result{}, errors.Join(manageErr, err)
	}
	if manageErr != nil {
		return consumer.Result{}, manageErr
	}
	var res consumer.Result
	if !satisfied {
		// The pod events normally requeue us; this is for the timeout.
		res.RequeueAfter = expireIn
	}
	if availableIn > 0 && (res.RequeueAfter == 0 || availableIn < res.RequeueAfter) {
		res.RequeueAfter = availableIn
	}
	return res, nil
}

// manageReplicas creates or deletes pods so that active has
// spec.replicas pods. Expectations are set before any write.
func (c *Controller) manageReplicas(ctx context.Context, key string, rs *appsv1.ReplicaSet, active []*corev1.Pod) error {
	want := int(ptrOr(rs.Spec.Replicas, 1))
	diff := len(active) - want
	log := c.log.With("key", key)
	switch {
	case diff < 0:
		n := min(-diff, burstReplicas)
		c.expect.Expect(key, rs.UID, n, nil)
		log.Debug("creating pods", "count", n, "want", want, "active", len(active))
		created, err := podcontrol.SlowStart(n, 1, func() error { return c.createPod(ctx, rs) })
		// Pods not created will never be observed.
		for range n - created {
			c.expect.CreationObserved(key, rs.UID)
		}
		if err != nil {
			return fmt.Errorf("replicaset: %s: create pods: %w", key, err)
		}
	case diff > 0:
		n := min(diff, burstReplicas)
		victims := c.podsToDelete(rs, active, n)
		uids := make([]types.UID, len(victims))
		for i, p := range victims {
			uids[i] = p.UID
		}
		c.expect.Expect(key, rs.UID, 0, uids)
		log.Debug("deleting pods", "count", n, "want", want, "active", len(active))
		var (
			wg   sync.WaitGroup
			mu   sync.Mutex
			errs []error
		)
		for _, p := range victims {
			wg.Go(func() {
				err := c.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{})
				if err == nil {
					c.event(ctx, rs, corev1.EventTypeNormal, ReasonSuccessfulDelete, "Deleted pod: "+p.Name)
					return
				}
				// The pod will not go (error), or went already (NotFound:
				// its DELETED event may be seen or not).
				c.expect.DeletionObserved(key, rs.UID, p.UID)
				if apierrors.IsNotFound(err) {
					return
				}
				c.event(ctx, rs, corev1.EventTypeWarning, ReasonFailedDelete, fmt.Sprintf("Error deleting: %v", err))
				mu.Lock()
				errs = append(errs, fmt.Errorf("delete pod %s: %w", p.Name, err))
				mu.Unlock()
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return fmt.Errorf("replicaset: %s: %w", key, err)
		}
	}
	return nil
}

// createPod creates one pod from rs's template.
func (c *Controller) createPod(ctx context.Context, rs *appsv1.ReplicaSet) error {
	pod := podFromTemplate(rs)
	if len(pod.Labels) == 0 {
		return errors.New("replicaset: unable to create pods, no labels")
	}
	out, err := c.client.CoreV1().Pods(rs.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	switch {
	case err == nil:
		c.event(ctx, rs, corev1.EventTypeNormal, ReasonSuccessfulCreate, "Created pod: "+out.Name)
	case apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
		// The namespace is going away with its pods: nothing to do.
		return nil
	default:
		c.event(ctx, rs, corev1.EventTypeWarning, ReasonFailedCreate, fmt.Sprintf("Error creating: %v", err))
	}
	return err
}

// Event reasons, as kube's pod control records them on the ReplicaSet.
const (
	ReasonSuccessfulCreate = "SuccessfulCreate"
	ReasonFailedCreate     = "FailedCreate"
	ReasonSuccessfulDelete = "SuccessfulDelete"
	ReasonFailedDelete     = "FailedDelete"
)

var replicaSetKind = appsv1.SchemeGroupVersion.WithKind("ReplicaSet")

// event records an Event about rs; ctx carries the cause.
func (c *Controller) event(ctx context.Context, rs *appsv1.ReplicaSet, typ, reason, msg string) {
	c.recorder.Event(ctx, eventrecord.Ref(rs, replicaSetKind), typ, reason, "", msg)
}

// podFromTemplate is the pod rs creates (kube's GetPodFromTemplate).
func podFromTemplate(rs *appsv1.ReplicaSet) *corev1.Pod {
	t := rs.Spec.Template.DeepCopy()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName:    rs.Name + "-",
			Namespace:       rs.Namespace,
			Labels:          t.Labels,
			Annotations:     t.Annotations,
			Finalizers:      t.Finalizers,
			OwnerReferences: []metav1.OwnerReference{controllerRef(rs)},
		},
		Spec: t.Spec,
	}
	return pod
}

func controllerRef(rs *appsv1.ReplicaSet) metav1.OwnerReference {
	yes := true
	return metav1.OwnerReference{
		APIVersion: controllerKind.GroupVersion().String(), Kind: controllerKind.Kind,
		Name: rs.Name, UID: rs.UID, Controller: &yes, BlockOwnerDeletion: &yes,
	}
}

// podsToDelete picks the n least useful of active, ranked among the pods of
// rs's siblings (ReplicaSets with the same controller, e.g. one
// Deployment's), as kube does.
func (c *Controller) podsToDelete(rs *appsv1.ReplicaSet, active []*corev1.Pod, n int) []*corev1.Pod {
	pods := append([]*corev1.Pod(nil), active...)
	if n < len(pods) {
		rankPods(pods, c.relatedPods(rs, active), c.now())
	}
	return pods[:n]
}

// relatedPods are the pods of the ReplicaSets controlled by rs's
// controller, or active if rs has none.
func (c *Controller) relatedPods(rs *appsv1.ReplicaSet, active []*corev1.Pod) []*corev1.Pod {
	owner := metav1.GetControllerOfNoCopy(rs)
	if owner == nil {
		return active
	}
	var out []*corev1.Pod
	for _, sib := range c.rsets.ByIndex(consumer.IndexOwner, string(owner.UID)) {
		if sib.Namespace != rs.Namespace {
			continue
		}
		if sib.UID == rs.UID {
			out = append(out, active...)
			continue
		}
		out = append(out, c.pods.ByIndex(consumer.IndexOwner, string(sib.UID))...)
	}
	return out
}

func ptrOr[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}

// updateStatus writes status if it differs from rs's. A conflict is
// retried once on a fresh read (kube's updateReplicaSetStatus).
func (c *Controller) updateStatus(ctx context.Context, rs *appsv1.ReplicaSet, status appsv1.ReplicaSetStatus) error {
	if statusEqual(rs.Status, status) {
		return nil
	}
	api := c.client.AppsV1().ReplicaSets(rs.Namespace)
	cur := rs.DeepCopy()
	for attempt := 0; ; attempt++ {
		cur.Status = status
		_, err := api.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		if err == nil || apierrors.IsNotFound(err) {
			return nil
		}
		if !apierrors.IsConflict(err) || attempt > 0 {
			return fmt.Errorf("replicaset: %s/%s: update status: %w", rs.Namespace, rs.Name, err)
		}
		fresh, gerr := api.Get(ctx, rs.Name, metav1.GetOptions{})
		if gerr != nil || fresh.UID != rs.UID {
			return fmt.Errorf("replicaset: %s/%s: update status: %w", rs.Namespace, rs.Name, err)
		}
		if fresh.Generation != rs.Generation {
			// The spec moved on: the next round computes a new status.
			return nil
		}
		cur = fresh
	}
}
