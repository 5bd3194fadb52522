package disruption

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/events/consumer"
	"github.com/cairn-dev/cairn/schemas"
	"github.com/cairn-dev/cairn/services/eventrecord"
)

// Name is the controller's name in logs.
const Name = "disruption"

// Component is the source of the controller's Events, as kube's.
const Component = "controllermanager"

// DeletionTimeout is how long a pod the apiserver let an eviction through
// for stays in disruptedPods (not counted healthy) while it is not being
// deleted, as kube's.
const DeletionTimeout = 2 * time.Minute

// PartialResync is how often a budget is looked at again when the pod
// cache is partial (see the package doc).
const PartialResync = 5 * time.Second

var (
	pdbResource = policyv1.SchemeGroupVersion.WithResource("poddisruptionbudgets")
	pdbKind     = policyv1.SchemeGroupVersion.WithKind("PodDisruptionBudget")
)

// Options configure the controller.
type Options struct {
	// Workers is the number of budgets reconciled at once; 0 means 2.
	Workers int
	// Clock is the time source; nil is time.Now.
	Clock func() time.Time
}

// Controller is the disruption controller. Build it with New and start it
// with Run.
type Controller struct {
	log      *slog.Logger
	now      func() time.Time
	client   kubernetes.Interface
	pdbs     *consumer.Cache[*policyv1.PodDisruptionBudget]
	pods     *consumer.Cache[*corev1.Pod]
	rsets    *consumer.Cache[*appsv1.ReplicaSet]
	deps     *consumer.Cache[*appsv1.Deployment]
	ctrl     *consumer.Controller
	recorder *eventrecord.Recorder
}

// New builds the controller on m's caches (pods Partitioned), client and recorder.
func New(m *consumer.Manager, opts Options) (*Controller, error) {
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	if opts.Workers <= 0 {
		opts.Workers = 2
	}
	log := m.Log().With("controller", Name)
	c := &Controller{log: log, now: opts.Clock, client: m.Client()}
	var err error
	if c.recorder, err = eventrecord.ForManager(m, eventrecord.Config{Component: Component, Now: opts.Clock, Log: log}, 0, 0); err != nil {
		return nil, fmt.Errorf("disruption: new: %w", err)
	}
	if c.pdbs, err = consumer.CacheFor[*policyv1.PodDisruptionBudget](m, pdbResource); err != nil {
		return nil, fmt.Errorf("disruption: new: %w", err)
	}
	if c.pods, err = consumer.CacheFor[*corev1.Pod](m, corev1.SchemeGroupVersion.WithResource("pods"), consumer.Partitioned()); err != nil {
		return nil, fmt.Errorf("disruption: new: %w", err)
	}
	if c.rsets, err = consumer.CacheFor[*appsv1.ReplicaSet](m, appsv1.SchemeGroupVersion.WithResource("replicasets")); err != nil {
		return nil, fmt.Errorf("disruption: new: %w", err)
	}
	if c.deps, err = consumer.CacheFor[*appsv1.Deployment](m, appsv1.SchemeGroupVersion.WithResource("deployments")); err != nil {
		return nil, fmt.Errorf("disruption: new: %w", err)
	}
	if c.ctrl, err = m.NewController(consumer.ControllerConfig{
		Name: Name, Reconciler: c, Workers: opts.Workers, Log: log,
		WaitFor: []consumer.Syncer{c.pdbs, c.pods, c.rsets, c.deps},
	}); err != nil {
		return nil, fmt.Errorf("disruption: new: %w", err)
	}
	consumer.For(c.pdbs, c.ctrl, nil)
	enqueue := func(pod *corev1.Pod, ev *events.Event) {
		for _, pdb := range c.budgetsOf(pod) {
			c.ctrl.Enqueue(consumer.KeyOf(pdb), ev)
		}
	}
	c.pods.AddHandler(consumer.Handler[*corev1.Pod]{
		OnAdd: enqueue,
		OnUpdate: func(old, pod *corev1.Pod, ev *events.Event) {
			enqueue(pod, ev)
			if !labels.Equals(old.Labels, pod.Labels) {
				enqueue(old, ev)
			}
		},
		OnDelete: enqueue,
	})
	return c, nil
}

// budgetsOf are the budgets of pod's namespace whose selector matches it.
func (c *Controller) budgetsOf(pod *corev1.Pod) []*policyv1.PodDisruptionBudget {
	var out []*policyv1.PodDisruptionBudget
	for _, pdb := range c.pdbs.ByIndex(consumer.IndexNamespace, pod.Namespace) {
		if schemas.BudgetSelects(pdb, pod) {
			out = append(out, pdb)
		}
	}
	return out
}

// Reconcile brings one budget's status up to date.
func (c *Controller) Reconcile(ctx context.Context, req consumer.Request) (consumer.Result, error) {
	ns, name := consumer.SplitKey(req.Key)
	pdb, ok := c.pdbs.Get(ns, name)
	if !ok {
		return consumer.Result{}, nil
	}
	pods, err := c.podsOf(ctx, pdb)
	if err != nil {
		return consumer.Result{}, err
	}
	var res consumer.Result
	if c.pods.Partial() {
		res.RequeueAfter = PartialResync
	}
	if len(pods) == 0 {
		c.recorder.Event(ctx, eventrecord.Ref(pdb, pdbKind), corev1.EventTypeNormal, "NoPods", "", "No matching pods found")
	}
	expected, desired, err := c.expectedAndDesired(ctx, pdb, pods)
	if err != nil {
		return res, c.failSafe(ctx, pdb, err)
	}
	now := c.now()
	disrupted, recheck := c.disruptedPods(ctx, pdb, pods, now)
	if recheck > 0 && (res.RequeueAfter == 0 || recheck < res.RequeueAfter) {
		res.RequeueAfter = recheck
	}
	healthy := countHealthy(pods, disrupted, now)
	return res, c.updateStatus(ctx, pdb, healthy, desired, expected, disrupted)
}

// podsOf are the pods pdb selects, from the cache, or from the apiserver
// when the cache holds only some pods.
func (c *Controller) podsOf(ctx context.Context, pdb *policyv1.PodDisruptionBudget) ([]*corev1.Pod, error) {
	sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	if err != nil || pdb.Spec.Selector == nil {
		// A null selector selects nothing; validation rejects invalid ones.
		return nil, nil
	}
	if !c.pods.Partial() {
		var out []*corev1.Pod
		for _, p := range c.pods.ByIndex(consumer.IndexNamespace, pdb.Namespace) {
			if sel.Matches(labels.Set(p.Labels)) {
				out = append(out, p)
			}
		}
		return out, nil
	}
	list, err := c.client.CoreV1().Pods(pdb.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return nil, fmt.Errorf("disruption: list the pods of %s: %w", consumer.KeyOf(pdb), err)
	}
	out := make([]*corev1.Pod, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}

// expectedAndDesired computes expectedPods and desiredHealthy (see the
// package doc).
func (c *Controller) expectedAndDesired(ctx context.Context, pdb *policyv1.PodDisruptionBudget, pods []*corev1.Pod) (expected, desired int32, err error) {
	switch {
	case pdb.Spec.MaxUnavailable != nil:
		if expected, err = c.expectedScale(ctx, pdb, pods); err != nil {
			return 0, 0, err
		}
		maxUnavailable, err := intstr.GetScaledValueFromIntOrPercent(pdb.Spec.MaxUnavailable, int(expected), true)
		if err != nil {
			return 0, 0, err
		}
		return expected, max(expected-int32(maxUnavailable), 0), nil
	case pdb.Spec.MinAvailable != nil && pdb.Spec.MinAvailable.Type == intstr.Int:
		return int32(len(pods)), pdb.Spec.MinAvailable.IntVal, nil
	case pdb.Spec.MinAvailable != nil:
		if expected, err = c.expectedScale(ctx, pdb, pods); err != nil {
			return 0, 0, err
		}
		minAvailable, err := intstr.GetScaledValueFromIntOrPercent(pdb.Spec.MinAvailable, int(expected), true)
		if err != nil {
			return 0, 0, err
		}
		return expected, int32(minAvailable), nil
	}
	return int32(len(pods)), 0, nil
}

// expectedScale is the sum of the replicas of the controllers of pods,
// each counted once.
func (c *Controller) expectedScale(ctx context.Context, pdb *policyv1.PodDisruptionBudget, pods []*corev1.Pod) (int32, error) {
	scales := map[types.UID]int32{}
	seen := map[types.UID]bool{}
	for _, pod := range pods {
		ref := metav1.GetControllerOfNoCopy(pod)
		if ref == nil {
			err := fmt.Errorf("found no controller ref for pod %q", pod.Name)
			c.recorder.Event(ctx, eventrecord.Ref(pdb, pdbKind), corev1.EventTypeWarning, "NoControllerRef", "", err.Error())
			return 0, err
		}
		if seen[ref.UID] {
			continue
		}
		seen[ref.UID] = true
		uid, scale, ok := c.scaleOf(ref, pod.Namespace)
		if !ok {
			err := fmt.Errorf("found no controllers for pod %q", pod.Name)
			c.recorder.Event(ctx, eventrecord.Ref(pdb, pdbKind), corev1.EventTypeWarning, "NoControllers", "", err.Error())
			return 0, err
		}
		scales[uid] = scale
	}
	var sum int32
	for _, n := range scales {
		sum += n
	}
	return sum, nil
}

// scaleOf finds the controller a pod's controller reference names and its
// desired replicas: a ReplicaSet, or the Deployment that controls it.
func (c *Controller) scaleOf(ref *metav1.OwnerReference, ns string) (types.UID, int32, bool) {
	if ref.Kind != "ReplicaSet" || ref.APIVersion != appsv1.SchemeGroupVersion.String() {
		return "", 0, false
	}
	rs, ok := c.rsets.Get(ns, ref.Name)
	if !ok || rs.UID != ref.UID {
		return "", 0, false
	}
	if dref := metav1.GetControllerOfNoCopy(rs); dref != nil && dref.Kind == "Deployment" && dref.APIVersion == appsv1.SchemeGroupVersion.String() {
		d, ok := c.deps.Get(ns, dref.Name)
		if !ok || d.UID != dref.UID {
			return "", 0, false
		}
		return d.UID, replicas(d.Spec.Replicas), true
	}
	return rs.UID, replicas(rs.Spec.Replicas), true
}

func replicas(p *int32) int32 {
	if p == nil {
		return 1
	}
	return *p
}

// disruptedPods keeps the entries of status.disruptedPods whose pods are
// not being deleted yet and whose eviction is younger than
// DeletionTimeout; recheck is when the first of them expires.
func (c *Controller) disruptedPods(ctx context.Context, pdb *policyv1.PodDisruptionBudget, pods []*corev1.Pod, now time.Time) (map[string]metav1.Time, time.Duration) {
	out := map[string]metav1.Time{}
	var recheck time.Duration
	if len(pdb.Status.DisruptedPods) == 0 {
		return out, 0
	}
	for _, pod := range pods {
		at, ok := pdb.Status.DisruptedPods[pod.Name]
		if !ok || pod.DeletionTimestamp != nil {
			continue
		}
		left := at.Add(DeletionTimeout).Sub(now)
		if left < 0 {
			c.recorder.Eventf(ctx, eventrecord.Ref(pod, corev1.SchemeGroupVersion.WithKind("Pod")), corev1.EventTypeWarning, "NotDeleted", "",
				"Pod was expected by PDB %s/%s to be deleted but it wasn't", pdb.Namespace, pdb.Name)
			continue
		}
		out[pod.Name] = at
		if recheck == 0 || left < recheck {
			recheck = left
		}
	}
	return out, recheck
}

// countHealthy counts the pods that are Ready, not being deleted and not
// just evicted.
func countHealthy(pods []*corev1.Pod, disrupted map[string]metav1.Time, now time.Time) int32 {
	var n int32
	for _, pod := range pods {
		if pod.DeletionTimestamp != nil {
			continue
		}
		if at, ok := disrupted[pod.Name]; ok && at.Add(DeletionTimeout).After(now) {
			continue
		}
		if schemas.PodReady(pod) {
			n++
		}
	}
	return n
}

// updateStatus writes the budget's status if it changed.
func (c *Controller) updateStatus(ctx context.Context, pdb *policyv1.PodDisruptionBudget, healthy, desired, expected int32, disrupted map[string]metav1.Time) error {
	allowed := healthy - desired
	if expected <= 0 || allowed <= 0 {
		allowed = 0
	}
	st := pdb.Status
	if st.CurrentHealthy == healthy && st.DesiredHealthy == desired && st.ExpectedPods == expected && st.DisruptionsAllowed == allowed &&
		apiequality.Semantic.DeepEqual(st.DisruptedPods, disrupted) && st.ObservedGeneration == pdb.Generation && conditionUpToDate(pdb) {
		return nil
	}
	upd := pdb.DeepCopy()
	upd.Status = policyv1.PodDisruptionBudgetStatus{CurrentHealthy: healthy, DesiredHealthy: desired, ExpectedPods: expected,
		DisruptionsAllowed: allowed, DisruptedPods: disrupted, ObservedGeneration: pdb.Generation, Conditions: upd.Status.Conditions}
	schemas.SetDisruptionAllowed(upd)
	return c.write(ctx, upd)
}

// conditionUpToDate: the DisruptionAllowed condition agrees with
// disruptionsAllowed and the observed generation.
func conditionUpToDate(pdb *policyv1.PodDisruptionBudget) bool {
	cond := apimeta.FindStatusCondition(pdb.Status.Conditions, policyv1.DisruptionAllowedCondition)
	if cond == nil || cond.ObservedGeneration != pdb.Status.ObservedGeneration {
		return false
	}
	if pdb.Status.DisruptionsAllowed > 0 {
		return cond.Status == metav1.ConditionTrue && cond.Reason == policyv1.SufficientPodsReason
	}
	return cond.Status == metav1.ConditionFalse && cond.Reason == policyv1.InsufficientPodsReason
}

// failSafe allows no disruption when the budget cannot be computed.
func (c *Controller) failSafe(ctx context.Context, pdb *policyv1.PodDisruptionBudget, cause error) error {
	upd := pdb.DeepCopy()
	upd.Status.DisruptionsAllowed = 0
	if upd.Status.Conditions == nil {
		upd.Status.Conditions = []metav1.Condition{}
	}
	apimeta.SetStatusCondition(&upd.Status.Conditions, metav1.Condition{Type: policyv1.DisruptionAllowedCondition,
		Status: metav1.ConditionFalse, Reason: policyv1.SyncFailedReason, Message: cause.Error(),
		ObservedGeneration: upd.Status.ObservedGeneration})
	if apiequality.Semantic.DeepEqual(upd.Status, pdb.Status) {
		return nil
	}
	c.log.Info("budget fails safe", "pdb", consumer.KeyOf(pdb), "err", cause)
	return c.write(ctx, upd)
}

func (c *Controller) write(ctx context.Context, pdb *policyv1.PodDisruptionBudget) error {
	_, err := c.client.PolicyV1().PodDisruptionBudgets(pdb.Namespace).UpdateStatus(ctx, pdb, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		// A conflict means the cache is behind: the newer version's event
		// queues the budget again, and the retry reads it.
		return fmt.Errorf("disruption: update the status of %s: %w", consumer.KeyOf(pdb), err)
	}
	return nil
}
