package deployment

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/cairn-dev/cairn/events/consumer"
	"github.com/cairn-dev/cairn/services/eventrecord"
)

// Reconcile syncs one deployment, as kube's syncDeployment: claim its
// replica sets, then (in this order of priority) only update the status of
// a deployment being deleted, scale a paused one or one whose replicas
// changed, or roll it out with its strategy.
func (c *Controller) Reconcile(ctx context.Context, req consumer.Request) (consumer.Result, error) {
	ns, name := req.NamespaceName()
	cached, ok := c.deployments.Get(ns, name)
	if !ok {
		c.rssWritten.Forget(req.Key)
		return consumer.Result{}, nil
	}
	// The replica set cache follows the log on its own: a round can see
	// the deployment of after this replica's last scale (a new template)
	// with its replica sets from before it, and create the new replica set
	// counting a size the old one no longer has (2 + 1 + 1 pods for
	// replicas 2, maxSurge 1). Wait for the own write instead: its event
	// queues the key again (the requeue is a safety net).
	if !c.rssWritten.Seen(req.Key, c.rss.Revision().String()) {
		return consumer.Result{RequeueAfter: time.Second}, nil
	}
	s := &syncer{Controller: c, ctx: ctx, key: req.Key, log: c.log.With("deployment", req.Key)}
	if err := s.syncDeployment(cached.DeepCopy()); err != nil {
		return consumer.Result{}, fmt.Errorf("deployment: sync %s: %w", req.Key, err)
	}
	return consumer.Result{RequeueAfter: s.requeue}, nil
}

// syncer is one sync of one deployment.
type syncer struct {
	*Controller
	ctx context.Context
	key string
	log *slog.Logger
	// requeue asks for a progress check after that long.
	requeue time.Duration
}

// wrote records a write to one of the deployment's replica sets that
// returned out (see Reconcile).
func (s *syncer) wrote(out *appsv1.ReplicaSet) {
	if out != nil {
		s.rssWritten.Wrote(s.key, out.ResourceVersion)
	}
}

// event records an Event about d, caused by what this sync reacts to.
func (s *syncer) event(d *appsv1.Deployment, typ, reason, msg string) {
	s.recorder.Event(s.ctx, eventrecord.Ref(d, deploymentKind), typ, reason, "", msg)
}

func (s *syncer) syncDeployment(d *appsv1.Deployment) error {
	if d.Spec.Selector == nil || apiequality.Semantic.DeepEqual(d.Spec.Selector, &metav1.LabelSelector{}) {
		// A selector that selects everything is refused, as kube does.
		s.event(d, corev1.EventTypeWarning, "SelectingAll", "This deployment is selecting all pods. A non-empty selector is required.")
		if d.Status.ObservedGeneration < d.Generation {
			d.Status.ObservedGeneration = d.Generation
			return s.updateStatus(d)
		}
		return nil
	}
	rsList, err := s.replicaSetsFor(d)
	if err != nil {
		return err
	}
	if d.DeletionTimestamp != nil {
		return s.syncStatusOnly(d, rsList)
	}
	if err := s.checkPausedConditions(d); err != nil {
		return err
	}
	if d.Spec.Paused {
		return s.sync(d, rsList)
	}
	scaling, err := s.isScalingEvent(d, rsList)
	if err != nil {
		return err
	}
	if scaling {
		return s.sync(d, rsList)
	}
	switch d.Spec.Strategy.Type {
	case appsv1.RecreateDeploymentStrategyType:
		return s.rolloutRecreate(d, rsList)
	case appsv1.RollingUpdateDeploymentStrategyType:
		return s.rolloutRolling(d, rsList)
	}
	return consumer.TerminalError(fmt.Errorf("unknown strategy type %q", d.Spec.Strategy.Type))
}

// updateStatus writes d's status and takes the server's copy back, so a
// second write in the same sync does not conflict with the first.
func (s *syncer) updateStatus(d *appsv1.Deployment) error {
	out, err := s.client.AppsV1().Deployments(d.Namespace).UpdateStatus(s.ctx, d, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("update status: %w", err)
	}
	*d = *out
	return nil
}

// replicaSetsFor claims the deployment's replica sets as kube's
// ControllerRefManager does: it keeps those it controls that match its
// selector, adopts orphans that match, and releases those that no longer
// match. The returned objects are copies.
func (s *syncer) replicaSetsFor(d *appsv1.Deployment) ([]*appsv1.ReplicaSet, error) {
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return nil, consumer.TerminalError(fmt.Errorf("selector: %w", err))
	}
	var out []*appsv1.ReplicaSet
	checked, canAdopt := false, false
	for _, cached := range s.rss.ByIndex(consumer.IndexNamespace, d.Namespace) {
		ref := metav1.GetControllerOf(cached)
		matches := sel.Matches(labels.Set(cached.Labels))
		// Copies are made only of what is returned or written: the
		// namespace may hold many other replica sets.
		switch {
		case ref != nil && ref.UID == d.UID:
			if matches || d.DeletionTimestamp != nil {
				out = append(out, cached.DeepCopy())
				continue
			}
			if cached.DeletionTimestamp != nil {
				continue
			}
			if err := s.release(cached.DeepCopy(), d); err != nil {
				return nil, err
			}
		case ref == nil && matches && d.DeletionTimestamp == nil && cached.DeletionTimestamp == nil:
			if !checked {
				// As kube's canAdopt: recheck with a live read that
				// the deployment is still there and not being deleted.
				live, err := s.client.AppsV1().Deployments(d.Namespace).Get(s.ctx, d.Name, metav1.GetOptions{})
				if err != nil && !apierrors.IsNotFound(err) {
					return nil, fmt.Errorf("recheck before adoption: %w", err)
				}
				checked = true
				canAdopt = err == nil && live.UID == d.UID && live.DeletionTimestamp == nil
			}
			if !canAdopt {
				continue
			}
			adopted, err := s.adopt(cached.DeepCopy(), d)
			if err != nil {
				return nil, err
			}
			if adopted != nil {
				out = append(out, adopted)
			}
		}
	}
	return out, nil
}

func (s *syncer) adopt(rs *appsv1.ReplicaSet, d *appsv1.Deployment) (*appsv1.ReplicaSet, error) {
	rs.OwnerReferences = append(rs.OwnerReferences, *metav1.NewControllerRef(d, appsv1.SchemeGroupVersion.WithKind("Deployment")))
	out, err := s.client.AppsV1().ReplicaSets(rs.Namespace).Update(s.ctx, rs, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("adopt replica set %s: %w", rs.Name, err)
	}
	s.wrote(out)
	s.log.Info("adopted replica set", "replicaSet", rs.Name)
	return out, nil
}

func (s *syncer) release(rs *appsv1.ReplicaSet, d *appsv1.Deployment) error {
	var refs []metav1.OwnerReference
	for _, r := range rs.OwnerReferences {
		if r.UID != d.UID {
			refs = append(refs, r)
		}
	}
	rs.OwnerReferences = refs
	_, err := s.client.AppsV1().ReplicaSets(rs.Namespace).Update(s.ctx, rs, metav1.UpdateOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("release replica set %s: %w", rs.Name, err)
	}
	return nil
}

// syncStatusOnly only updates the status (deployment being deleted).
func (s *syncer) syncStatusOnly(d *appsv1.Deployment, rsList []*appsv1.ReplicaSet) error {
	newRS, oldRSs, err := s.allReplicaSetsAndSyncRevision(d, rsList, false)
	if err != nil {
		return err
	}
	return s.syncDeploymentStatus(append(oldRSs, newRS), newRS, d)
}

// sync scales a paused deployment or one whose replicas changed, and
// cleans up the history of a paused one.
func (s *syncer) sync(d *appsv1.Deployment, rsList []*appsv1.ReplicaSet) error {
	newRS, oldRSs, err := s.allReplicaSetsAndSyncRevision(d, rsList, false)
	if err != nil {
		return err
	}
	if err := s.scale(d, newRS, oldRSs); err != nil {
		return err
	}
	if d.Spec.Paused {
		if err := s.cleanupDeployment(oldRSs, d); err != nil {
			return err
		}
	}
	return s.syncDeploymentStatus(append(oldRSs, newRS), newRS, d)
}

// checkPausedConditions records pausing and resuming in the Progressing
// condition, so time spent paused does not count against the deadline.
func (s *syncer) checkPausedConditions(d *appsv1.Deployment) error {
	if !hasProgressDeadline(d) {
		return nil
	}
	cond := getCondition(d.Status, appsv1.DeploymentProgressing)
	if cond != nil && cond.Reason == ReasonTimedOut {
		return nil
	}
	pausedCond := cond != nil && cond.Reason == ReasonPaused
	switch {
	case d.Spec.Paused && !pausedCond:
		setCondition(&d.Status, newCondition(appsv1.DeploymentProgressing, corev1.ConditionUnknown, ReasonPaused, "Deployment is paused", s.now()))
	case !d.Spec.Paused && pausedCond:
		setCondition(&d.Status, newCondition(appsv1.DeploymentProgressing, corev1.ConditionUnknown, ReasonResumed, "Deployment is resumed", s.now()))
	default:
		return nil
	}
	return s.updateStatus(d)
}

// allReplicaSetsAndSyncRevision returns the new replica set (nil if none
// and create is false) and all old ones, with the revision of the new one
// raised above the old ones and copied to the deployment.
func (s *syncer) allReplicaSetsAndSyncRevision(d *appsv1.Deployment, rsList []*appsv1.ReplicaSet, create bool) (*appsv1.ReplicaSet, []*appsv1.ReplicaSet, error) {
	_, allOld := findOldReplicaSets(d, rsList)
	newRS, err := s.newReplicaSet(d, rsList, allOld, create)
	if err != nil {
		return nil, nil, err
	}
	return newRS, allOld, nil
}

// newReplicaSet finds the replica set of the deployment's template and
// syncs its annotations and revision (a rollback gives an old replica set
// a new revision), or creates it, named <deployment>-<pod-template-hash>.
func (s *syncer) newReplicaSet(d *appsv1.Deployment, rsList, oldRSs []*appsv1.ReplicaSet, create bool) (*appsv1.ReplicaSet, error) {
	existing := findNewReplicaSet(d, rsList)
	newRevision := maxRevision(oldRSs) + 1

	if existing != nil {
		rs := existing.DeepCopy()
		changed := setNewReplicaSetAnnotations(d, rs, newRevision, true)
		if changed || rs.Spec.MinReadySeconds != d.Spec.MinReadySeconds {
			rs.Spec.MinReadySeconds = d.Spec.MinReadySeconds
			out, err := s.client.AppsV1().ReplicaSets(rs.Namespace).Update(s.ctx, rs, metav1.UpdateOptions{})
			if err != nil {
				return nil, fmt.Errorf("update replica set %s: %w", rs.Name, err)
			}
			s.wrote(out)
			return out, nil
		}
		needsUpdate := setDeploymentRevision(d, rs.Annotations[RevisionAnnotation])
		if hasProgressDeadline(d) && getCondition(d.Status, appsv1.DeploymentProgressing) == nil {
			setCondition(&d.Status, newCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, ReasonFoundNewRS,
				fmt.Sprintf("Found new replica set %q", rs.Name), s.now()))
			needsUpdate = true
		}
		if needsUpdate {
			if err := s.updateStatus(d); err != nil {
				return nil, err
			}
		}
		return rs, nil
	}
	if !create {
		return nil, nil
	}

	template := d.Spec.Template.DeepCopy()
	hash := ComputeHash(template, d.Status.CollisionCount)
	template.Labels = cloneAndAdd(d.Spec.Template.Labels, appsv1.DefaultDeploymentUniqueLabelKey, hash)
	selector := d.Spec.Selector.DeepCopy()
	if selector.MatchLabels == nil {
		selector.MatchLabels = map[string]string{}
	}
	selector.MatchLabels[appsv1.DefaultDeploymentUniqueLabelKey] = hash
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{
			Name:            d.Name + "-" + hash,
			Namespace:       d.Namespace,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(d, appsv1.SchemeGroupVersion.WithKind("Deployment"))},
			Labels:          template.Labels,
		},
		Spec: appsv1.ReplicaSetSpec{
			Replicas:        new(int32),
			MinReadySeconds: d.Spec.MinReadySeconds,
			Selector:        selector,
			Template:        *template,
		},
	}
	n, err := newRSNewReplicas(d, append(append([]*appsv1.ReplicaSet{}, oldRSs...), rs), rs)
	if err != nil {
		return nil, consumer.TerminalError(err)
	}
	*rs.Spec.Replicas = n
	setNewReplicaSetAnnotations(d, rs, newRevision, false)

	created, err := s.client.AppsV1().ReplicaSets(d.Namespace).Create(s.ctx, rs, metav1.CreateOptions{})
	if err == nil {
		s.wrote(created)
	}
	alreadyExists := false
	switch {
	case apierrors.IsAlreadyExists(err):
		alreadyExists = true
		// Our cache is behind our own create, or it is a hash collision.
		cur, getErr := s.client.AppsV1().ReplicaSets(d.Namespace).Get(s.ctx, rs.Name, metav1.GetOptions{})
		if getErr != nil {
			return nil, fmt.Errorf("get replica set %s: %w", rs.Name, getErr)
		}
		if ref := metav1.GetControllerOf(cur); ref != nil && ref.UID == d.UID && equalIgnoreHash(&d.Spec.Template, &cur.Spec.Template) {
			created = cur
			break
		}
		if d.Status.CollisionCount == nil {
			d.Status.CollisionCount = new(int32)
		}
		*d.Status.CollisionCount++
		if uerr := s.updateStatus(d); uerr == nil {
			s.log.Info("hash collision, bumped collisionCount", "collisionCount", *d.Status.CollisionCount)
		}
		return nil, fmt.Errorf("create replica set %s: %w", rs.Name, err)
	case err != nil:
		msg := fmt.Sprintf("Failed to create new replica set %q: %v", rs.Name, err)
		if hasProgressDeadline(d) {
			setCondition(&d.Status, newCondition(appsv1.DeploymentProgressing, corev1.ConditionFalse, ReasonFailedRSCreate, msg, s.now()))
			_ = s.updateStatus(d) // the create error is the one to report
		}
		s.event(d, corev1.EventTypeWarning, ReasonFailedRSCreate, msg)
		return nil, fmt.Errorf("create replica set %s: %w", rs.Name, err)
	}
	if !alreadyExists {
		s.log.Info("created replica set", "replicaSet", created.Name, "replicas", n, "revision", newRevision)
		if n > 0 {
			s.event(d, corev1.EventTypeNormal, ReasonScalingReplicaSet, fmt.Sprintf("Scaled up replica set %s from 0 to %d", created.Name, n))
		}
	}
	needsUpdate := setDeploymentRevision(d, strconv.FormatInt(newRevision, 10))
	if !alreadyExists && hasProgressDeadline(d) {
		setCondition(&d.Status, newCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, ReasonNewReplicaSet,
			fmt.Sprintf("Created new replica set %q", created.Name), s.now()))
		needsUpdate = true
	}
	if needsUpdate {
		if err := s.updateStatus(d); err != nil {
			return nil, err
		}
	}
	return created, nil
}

func setDeploymentRevision(d *appsv1.Deployment, rev string) bool {
	if d.Annotations == nil {
		d.Annotations = map[string]string{}
	}
	if d.Annotations[RevisionAnnotation] == rev {
		return false
	}
	d.Annotations[RevisionAnnotation] = rev
	return true
}

func cloneAndAdd(m map[string]string, k, v string) map[string]string {
	out := make(map[string]string, len(m)+1)
	for a, b := range m {
		out[a] = b
	}
	out[k] = v
	return out
}

// scale handles a change of spec.replicas (or a paused deployment): the
// only active replica set takes the whole count; with several, a rolling
// deployment spreads the difference over them in proportion to their
// sizes, so a scaling event in the middle of a rollout neither hastens nor
// slows it.
func (s *syncer) scale(d *appsv1.Deployment, newRS *appsv1.ReplicaSet, oldRSs []*appsv1.ReplicaSet) error {
	if rs := findActiveOrLatest(newRS, oldRSs); rs != nil {
		if *rs.Spec.Replicas == *d.Spec.Replicas {
			return nil
		}
		_, _, err := s.scaleReplicaSetAndRecordEvent(rs, *d.Spec.Replicas, d)
		return err
	}
	if isSaturated(d, newRS) {
		for _, old := range filterActive(oldRSs) {
			if _, _, err := s.scaleReplicaSetAndRecordEvent(old, 0, d); err != nil {
				return err
			}
		}
		return nil
	}
	if !isRollingUpdate(d) {
		return nil
	}
	all := filterActive(append(append([]*appsv1.ReplicaSet{}, oldRSs...), newRS))
	allowed := int32(0)
	if *d.Spec.Replicas > 0 {
		allowed = *d.Spec.Replicas + maxSurge(d)
	}
	toAdd := allowed - sumSpec(all)
	op := ""
	switch {
	case toAdd > 0:
		sort.Sort(bySizeNewer(all))
		op = "up"
	case toAdd < 0:
		sort.Sort(bySizeOlder(all))
		op = "down"
	}
	added := int32(0)
	sizes := map[string]int32{}
	for _, rs := range all {
		if toAdd == 0 {
			sizes[rs.Name] = *rs.Spec.Replicas
			continue
		}
		p := proportion(rs, d, toAdd, added)
		sizes[rs.Name] = *rs.Spec.Replicas + p
		added += p
	}
	for i, rs := range all {
		if i == 0 && toAdd != 0 {
			sizes[rs.Name] = max(sizes[rs.Name]+toAdd-added, 0)
		}
		if _, _, err := s.scaleReplicaSet(rs, sizes[rs.Name], d, op); err != nil {
			return err
		}
	}
	return nil
}

func (s *syncer) scaleReplicaSetAndRecordEvent(rs *appsv1.ReplicaSet, n int32, d *appsv1.Deployment) (bool, *appsv1.ReplicaSet, error) {
	if *rs.Spec.Replicas == n {
		return false, rs, nil
	}
	op := "down"
	if *rs.Spec.Replicas < n {
		op = "up"
	}
	return s.scaleReplicaSet(rs, n, d, op)
}

// scaleReplicaSet sets the replica set's size and its desired-replicas and
// max-replicas annotations.
func (s *syncer) scaleReplicaSet(rs *appsv1.ReplicaSet, n int32, d *appsv1.Deployment, op string) (bool, *appsv1.ReplicaSet, error) {
	sizeChanged := *rs.Spec.Replicas != n
	desired, maxReplicas := *d.Spec.Replicas, *d.Spec.Replicas+maxSurge(d)
	if !sizeChanged && !replicasAnnotationsNeedUpdate(rs, desired, maxReplicas) {
		return false, rs, nil
	}
	from := *rs.Spec.Replicas
	cp := rs.DeepCopy()
	*cp.Spec.Replicas = n
	setReplicasAnnotations(cp, desired, maxReplicas)
	out, err := s.client.AppsV1().ReplicaSets(cp.Namespace).Update(s.ctx, cp, metav1.UpdateOptions{})
	if err != nil {
		return false, rs, fmt.Errorf("scale replica set %s: %w", rs.Name, err)
	}
	s.wrote(out)
	if sizeChanged {
		s.log.Info("scaled replica set", "replicaSet", rs.Name, "direction", op, "from", from, "to", n)
		s.event(d, corev1.EventTypeNormal, ReasonScalingReplicaSet, fmt.Sprintf("Scaled %s replica set %s from %d to %d", op, rs.Name, from, n))
	}
	*rs = *out
	return sizeChanged, rs, nil
}

// cleanupDeployment deletes the oldest old replica sets beyond
// revisionHistoryLimit, only those scaled to zero with no pods left.
func (s *syncer) cleanupDeployment(oldRSs []*appsv1.ReplicaSet, d *appsv1.Deployment) error {
	if d.Spec.RevisionHistoryLimit == nil {
		return nil
	}
	var alive []*appsv1.ReplicaSet
	for _, rs := range oldRSs {
		if rs != nil && rs.DeletionTimestamp == nil {
			alive = append(alive, rs)
		}
	}
	diff := int32(len(alive)) - *d.Spec.RevisionHistoryLimit
	if diff <= 0 {
		return nil
	}
	sort.Sort(byRevision(alive))
	for i := int32(0); i < diff; i++ {
		rs := alive[i]
		if rs.Status.Replicas != 0 || *rs.Spec.Replicas != 0 || rs.Generation > rs.Status.ObservedGeneration {
			continue
		}
		err := s.client.AppsV1().ReplicaSets(rs.Namespace).Delete(s.ctx, rs.Name, metav1.DeleteOptions{
			Preconditions: &metav1.Preconditions{UID: &rs.UID},
		})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("delete old replica set %s: %w", rs.Name, err)
		}
		s.log.Info("deleted old replica set", "replicaSet", rs.Name, "revision", revision(rs))
	}
	return nil
}

// syncDeploymentStatus writes the status computed from the replica sets if
// it changed.
func (s *syncer) syncDeploymentStatus(allRSs []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet, d *appsv1.Deployment) error {
	st := s.calculateStatus(allRSs, newRS, d)
	if apiequality.Semantic.DeepEqual(d.Status, st) {
		return nil
	}
	d.Status = st
	return s.updateStatus(d)
}

// calculateStatus is the deployment status the replica sets give, with the
// Available condition.
func (s *syncer) calculateStatus(allRSs []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet, d *appsv1.Deployment) appsv1.DeploymentStatus {
	available := sumStatus(allRSs, statusAvailable)
	st := appsv1.DeploymentStatus{
		ObservedGeneration:  d.Generation,
		Replicas:            sumStatus(allRSs, statusReplicas),
		UpdatedReplicas:     sumStatus([]*appsv1.ReplicaSet{newRS}, statusReplicas),
		ReadyReplicas:       sumStatus(allRSs, statusReady),
		AvailableReplicas:   available,
		UnavailableReplicas: max(sumSpec(allRSs)-available, 0),
		CollisionCount:      d.Status.CollisionCount,
	}
	st.Conditions = append(st.Conditions, d.Status.Conditions...)
	if available >= *d.Spec.Replicas-maxUnavailable(d) {
		setCondition(&st, newCondition(appsv1.DeploymentAvailable, corev1.ConditionTrue, ReasonMinimumAvailable, "Deployment has minimum availability.", s.now()))
	} else {
		setCondition(&st, newCondition(appsv1.DeploymentAvailable, corev1.ConditionFalse, ReasonMinimumUnavailable, "Deployment does not have minimum availability.", s.now()))
	}
	return st
}

// isScalingEvent: an active replica set records a desired-replicas other
// than the deployment's replicas.
func (s *syncer) isScalingEvent(d *appsv1.Deployment, rsList []*appsv1.ReplicaSet) (bool, error) {
	newRS, oldRSs, err := s.allReplicaSetsAndSyncRevision(d, rsList, false)
	if err != nil {
		return false, err
	}
	for _, rs := range filterActive(append(oldRSs, newRS)) {
		desired, ok := intAnnotation(rs, DesiredReplicasAnnotation)
		if ok && desired != *d.Spec.Replicas {
			return true, nil
		}
	}
	return false, nil
}
