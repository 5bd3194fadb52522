package statefulset

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cairn-dev/cairn/events/consumer"
)

var _ consumer.Reconciler = (*Controller)(nil)

// Reconcile runs one round for the StatefulSet req.Key (kube's sync and
// UpdateStatefulSet; see the package documentation). It is called by the
// controller's workers; the cause in ctx is carried by every write. An
// error means retry with back-off.
func (c *Controller) Reconcile(ctx context.Context, req consumer.Request) (consumer.Result, error) {
	ns, name := req.NamespaceName()
	set, ok := c.sets.Get(ns, name)
	if !ok {
		c.written.Forget(req.Key)
		c.revsWritten.Forget(req.Key)
		return consumer.Result{}, nil
	}
	// A round acts on the status and the revisions its last round wrote:
	// their events queue the key again.
	if !c.written.Seen(req.Key, set.ResourceVersion) ||
		!c.revsWritten.Seen(req.Key, strconv.FormatInt(int64(c.revs.Revision()), 10)) {
		return consumer.Result{RequeueAfter: time.Second}, nil
	}
	sel, err := metav1.LabelSelectorAsSelector(set.Spec.Selector)
	if err != nil {
		// Validation rejects such selectors; nothing to retry.
		return consumer.Result{}, consumer.TerminalError(fmt.Errorf("statefulset: %s: selector: %w", req.Key, err))
	}
	revs := c.listRevisions(set, sel)
	if err := c.adoptOrphanRevisions(ctx, set, revs); err != nil {
		return consumer.Result{}, err
	}
	pods, err := c.podsOf(ctx, set, sel)
	if err != nil {
		return consumer.Result{}, err
	}
	availableIn, err := c.updateStatefulSet(ctx, set, pods, revs)
	if err != nil {
		return consumer.Result{}, fmt.Errorf("statefulset: %s: %w", req.Key, err)
	}
	// A pod that becomes available after minReadySeconds changes the
	// status (and lets OrderedReady go on) without an event of its own.
	return consumer.Result{RequeueAfter: availableIn}, nil
}

// updateStatefulSet is kube's UpdateStatefulSet and performUpdate: find
// the revisions, update the pods, write the status, trim the history.
// availableIn > 0 is when the next ready pod becomes available.
func (c *Controller) updateStatefulSet(ctx context.Context, set *appsv1.StatefulSet, pods []*corev1.Pod, revs []*appsv1.ControllerRevision) (availableIn time.Duration, err error) {
	key := consumer.KeyOf(set)
	set = set.DeepCopy()
	current, update, collisionCount, err := c.revisions(ctx, set, revs)
	if update != nil && update.ResourceVersion != "" {
		c.revsWritten.Wrote(key, update.ResourceVersion)
	}
	if err != nil {
		return 0, errors.Join(err, c.truncateHistory(ctx, set, pods, revs, current, update))
	}
	currentSet, err := applyRevision(set, current)
	if err != nil {
		return 0, err
	}
	updateSet, err := applyRevision(set, update)
	if err != nil {
		return 0, err
	}
	r := &round{
		c: c, set: set, currentSet: currentSet, updateSet: updateSet,
		current: current, update: update, now: c.now(), log: c.log.With("key", key),
	}
	status, updateErr := r.run(ctx, pods, collisionCount)
	statusErr := c.writeStatus(ctx, set, status)
	truncErr := c.truncateHistory(ctx, set, pods, revs, current, update)
	return r.availableIn, errors.Join(updateErr, statusErr, truncErr)
}
