package nodelifecycle

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/cairn-dev/cairn/events/consumer"
	"github.com/cairn-dev/cairn/services/eventrecord"
)

// DefaultGracePeriod is kube's --node-monitor-grace-period.
const DefaultGracePeriod = 50 * time.Second

// LeaseNamespace holds the kubelets' Leases.
const LeaseNamespace = "kube-node-lease"

// Component is the source of the controller's Events, as kube's.
const Component = "node-controller"

// Condition reasons and messages, as kube's.
const (
	ReasonStatusUnknown      = "NodeStatusUnknown"
	ReasonStatusNeverUpdated = "NodeStatusNeverUpdated"
	MessageStatusUnknown     = "Kubelet stopped posting node status."
	MessageNeverUpdated      = "Kubelet never posted node status."
	ReasonTaintEviction      = "TaintManagerEviction"
	ReasonDeletionByTaints   = "DeletionByTaintManager"
)

// Options configure the controller.
type Options struct {
	// GracePeriod is how long a node may go unheard before its conditions
	// become Unknown; 0 is DefaultGracePeriod.
	GracePeriod time.Duration
	// Clock is the time source; nil is time.Now.
	Clock func() time.Time
}

// Controller is the node lifecycle controller.
type Controller struct {
	cfg      Options
	log      *slog.Logger
	now      func() time.Time
	client   kubernetes.Interface
	nodes    *consumer.Cache[*corev1.Node]
	leases   *consumer.Cache[*coordinationv1.Lease]
	ctrl     *consumer.Controller
	recorder *eventrecord.Recorder

	mu sync.Mutex
	// heard is, per node, the last heartbeat seen and when this controller
	// saw it change (kube's probeTimestamp).
	heard map[string]heartbeat
	// tainted is, per node with NoExecute taints, when this controller
	// first saw them: tolerationSeconds count from then, as in kube's
	// taint eviction (timeAdded has only whole seconds).
	tainted map[string]time.Time
}

type heartbeat struct {
	signature string
	at        time.Time
}

// New builds the controller on m's node and node Lease caches, client
// and recorder.
func New(m *consumer.Manager, cfg Options) (*Controller, error) {
	if cfg.GracePeriod <= 0 {
		cfg.GracePeriod = DefaultGracePeriod
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	log := m.Log().With("controller", "nodelifecycle")
	c := &Controller{cfg: cfg, log: log, now: cfg.Clock, client: m.Client(), heard: map[string]heartbeat{}, tainted: map[string]time.Time{}}
	var err error
	if c.recorder, err = eventrecord.ForManager(m, eventrecord.Config{Component: Component, Now: cfg.Clock, Log: log}, 0, 0); err != nil {
		return nil, fmt.Errorf("nodelifecycle: %w", err)
	}
	if c.nodes, err = consumer.CacheFor[*corev1.Node](m, corev1.SchemeGroupVersion.WithResource("nodes")); err != nil {
		return nil, fmt.Errorf("nodelifecycle: %w", err)
	}
	if c.leases, err = consumer.CacheFor[*coordinationv1.Lease](m, coordinationv1.SchemeGroupVersion.WithResource("leases"),
		consumer.InNamespace(LeaseNamespace)); err != nil {
		return nil, fmt.Errorf("nodelifecycle: %w", err)
	}
	if c.ctrl, err = m.NewController(consumer.ControllerConfig{
		Name: "nodelifecycle", Reconciler: c, Workers: 2, Log: log,
		WaitFor: []consumer.Syncer{c.nodes, c.leases},
	}); err != nil {
		return nil, fmt.Errorf("nodelifecycle: %w", err)
	}
	consumer.For(c.nodes, c.ctrl, nil)
	// A node's Lease has the node's name.
	consumer.Watch(c.leases, c.ctrl, func(l *coordinationv1.Lease) []string { return []string{l.Name} })
	return c, nil
}

// Reconcile checks one node's heartbeat, sets its conditions and taints,
// and evicts the pods its NoExecute taints no longer tolerate.
func (c *Controller) Reconcile(ctx context.Context, req consumer.Request) (consumer.Result, error) {
	name := req.Key
	node, ok := c.nodes.Get("", name)
	if !ok {
		c.mu.Lock()
		delete(c.heard, name)
		delete(c.tainted, name)
		c.mu.Unlock()
		return consumer.Result{}, nil
	}
	now := c.now()
	silent := now.Sub(c.observe(node, now))
	if silent >= c.cfg.GracePeriod && !readyUnknown(node) {
		return consumer.Result{}, c.markUnknown(ctx, node, now)
	}
	if err := c.syncTaints(ctx, node, now); err != nil {
		return consumer.Result{}, err
	}
	next, err := c.evict(ctx, node, now)
	if err != nil {
		return consumer.Result{}, err
	}
	if !readyUnknown(node) {
		// Look again when the grace period would run out.
		next = minPositive(next, c.cfg.GracePeriod-silent)
	}
	return consumer.Result{RequeueAfter: next}, nil
}

// observe records the node's current heartbeat (its Lease's renewTime and
// its Ready condition's lastHeartbeatTime) and returns when this
// controller first saw it.
func (c *Controller) observe(node *corev1.Node, now time.Time) time.Time {
	sig := ""
	if l, ok := c.leases.Get(LeaseNamespace, node.Name); ok && l.Spec.RenewTime != nil {
		sig = l.Spec.RenewTime.UTC().Format(time.RFC3339Nano)
	}
	if r := condition(node, corev1.NodeReady); r != nil {
		sig += "/" + r.LastHeartbeatTime.UTC().Format(time.RFC3339) + "/" + string(r.Status)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	h, ok := c.heard[node.Name]
	if !ok || h.signature != sig {
		h = heartbeat{signature: sig, at: now}
		c.heard[node.Name] = h
	}
	return h.at
}

func condition(node *corev1.Node, t corev1.NodeConditionType) *corev1.NodeCondition {
	for i := range node.Status.Conditions {
		if node.Status.Conditions[i].Type == t {
			return &node.Status.Conditions[i]
		}
	}
	return nil
}

func readyUnknown(node *corev1.Node) bool {
	r := condition(node, corev1.NodeReady)
	return r != nil && r.Status == corev1.ConditionUnknown
}

// markUnknown sets the node's conditions to Unknown, records NodeNotReady,
// and marks its pods not ready, as kube does for a node gone silent.
func (c *Controller) markUnknown(ctx context.Context, node *corev1.Node, now time.Time) error {
	upd := node.DeepCopy()
	t := metav1.NewTime(now)
	seen := map[corev1.NodeConditionType]bool{}
	for i := range upd.Status.Conditions {
		cond := &upd.Status.Conditions[i]
		switch cond.Type {
		case corev1.NodeReady, corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure:
			seen[cond.Type] = true
			if cond.Status != corev1.ConditionUnknown {
				cond.LastTransitionTime = t
			}
			cond.Status, cond.Reason, cond.Message = corev1.ConditionUnknown, ReasonStatusUnknown, MessageStatusUnknown
		}
	}
	for _, ct := range []corev1.NodeConditionType{corev1.NodeReady, corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure} {
		if !seen[ct] {
			upd.Status.Conditions = append(upd.Status.Conditions, corev1.NodeCondition{Type: ct, Status: corev1.ConditionUnknown,
				Reason: ReasonStatusNeverUpdated, Message: MessageNeverUpdated, LastHeartbeatTime: t, LastTransitionTime: t})
		}
	}
	if _, err := c.client.CoreV1().Nodes().UpdateStatus(ctx, upd, metav1.UpdateOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("nodelifecycle: mark node %s unknown: %w", node.Name, err)
	}
	c.log.Info("node stopped posting status", "node", node.Name, "grace", c.cfg.GracePeriod)
	c.recorder.Eventf(ctx, nodeRef(node), corev1.EventTypeNormal, "NodeNotReady", "", "Node %s status is now: NodeNotReady", node.Name)
	// The node is Unknown now, whatever happens to its pods: a failure here
	// is logged, not retried (the taints and evictions that follow do not
	// depend on it).
	if err := c.markPodsNotReady(ctx, node, now); err != nil {
		c.log.Warn("pods of an unknown node not marked not ready", "node", node.Name, "err", err)
	}
	return nil
}

// nodeRef is the reference Kubernetes' node Events make: the node's name as
// its UID.
func nodeRef(node *corev1.Node) corev1.ObjectReference {
	return corev1.ObjectReference{Kind: "Node", Name: node.Name, UID: node.UID}
}

var podKind = corev1.SchemeGroupVersion.WithKind("Pod")

// podsOn lists the node's pods from the apiserver.
func (c *Controller) podsOn(ctx context.Context, node string) ([]corev1.Pod, error) {
	l, err := c.client.CoreV1().Pods("").List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String()})
	if err != nil {
		return nil, fmt.Errorf("nodelifecycle: list pods of node %s: %w", node, err)
	}
	return l.Items, nil
}

// markPodsNotReady sets the Ready condition of the node's pods to False.
func (c *Controller) markPodsNotReady(ctx context.Context, node *corev1.Node, now time.Time) error {
	pods, err := c.podsOn(ctx, node.Name)
	if err != nil {
		return err
	}
	var errs []error
	for i := range pods {
		p := &pods[i]
		if p.DeletionTimestamp != nil {
			continue
		}
		changed := false
		for j := range p.Status.Conditions {
			cond := &p.Status.Conditions[j]
			if cond.Type == corev1.PodReady && cond.Status != corev1.ConditionFalse {
				cond.Status, cond.LastTransitionTime, changed = corev1.ConditionFalse, metav1.NewTime(now), true
			}
		}
		if !changed {
			continue
		}
		c.recorder.Event(ctx, eventrecord.Ref(p, podKind), corev1.EventTypeWarning, "NodeNotReady", "", "Node is not ready")
		if _, err := c.client.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("nodelifecycle: mark pod %s/%s not ready: %w", p.Namespace, p.Name, err))
		}
	}
	return errors.Join(errs...)
}

// Taints the controller manages: by node condition.
var managedTaints = map[string]bool{corev1.TaintNodeUnreachable: true, corev1.TaintNodeNotReady: true}

// wantTaints are the taint keys a node's Ready condition calls for.
func wantTaints(node *corev1.Node) string {
	r := condition(node, corev1.NodeReady)
	switch {
	case r == nil:
		return ""
	case r.Status == corev1.ConditionUnknown:
		return corev1.TaintNodeUnreachable
	case r.Status == corev1.ConditionFalse:
		return corev1.TaintNodeNotReady
	}
	return ""
}

// syncTaints makes the node's condition taints (NoSchedule and NoExecute)
// match its Ready condition, keeping every other taint and the timeAdded of
// those it keeps.
func (c *Controller) syncTaints(ctx context.Context, node *corev1.Node, now time.Time) error {
	want := wantTaints(node)
	var taints []corev1.Taint
	have := map[corev1.TaintEffect]bool{}
	for _, t := range node.Spec.Taints {
		switch {
		case !managedTaints[t.Key]:
			taints = append(taints, t)
		case t.Key == want && !have[t.Effect] && (t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute):
			have[t.Effect] = true
			taints = append(taints, t)
		}
	}
	if want != "" && !have[corev1.TaintEffectNoSchedule] {
		taints = append(taints, corev1.Taint{Key: want, Effect: corev1.TaintEffectNoSchedule})
	}
	if want != "" && !have[corev1.TaintEffectNoExecute] {
		at := metav1.NewTime(now)
		taints = append(taints, corev1.Taint{Key: want, Effect: corev1.TaintEffectNoExecute, TimeAdded: &at})
	}
	if len(taints) == 0 && len(node.Spec.Taints) == 0 || apiequality.Semantic.DeepEqual(taints, node.Spec.Taints) {
		return nil
	}
	upd := node.DeepCopy()
	upd.Spec.Taints = taints
	if _, err := c.client.CoreV1().Nodes().Update(ctx, upd, metav1.UpdateOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("nodelifecycle: taint node %s: %w", node.Name, err)
	}
	c.log.Info("node taints updated", "node", node.Name, "conditionTaint", want)
	return nil
}

// evict deletes the pods of the node that do not tolerate its NoExecute
// taints, or whose tolerationSeconds have run out, and returns when the
// next one's run out (0: none pending).
func (c *Controller) evict(ctx context.Context, node *corev1.Node, now time.Time) (time.Duration, error) {
	var noExecute []corev1.Taint
	for _, t := range node.Spec.Taints {
		if t.Effect == corev1.TaintEffectNoExecute {
			noExecute = append(noExecute, t)
		}
	}
	c.mu.Lock()
	since, ok := c.tainted[node.Name]
	switch {
	case len(noExecute) == 0:
		delete(c.tainted, node.Name)
	case !ok:
		since = now
		c.tainted[node.Name] = now
	}
	c.mu.Unlock()
	if len(noExecute) == 0 {
		return 0, nil
	}
	pods, err := c.podsOn(ctx, node.Name)
	if err != nil {
		return 0, err
	}
	var next time.Duration
	var errs []error
	for i := range pods {
		p := &pods[i]
		if p.DeletionTimestamp != nil {
			continue
		}
		deadline, ok := evictionTime(p, noExecute, since, now)
		if !ok {
			continue // tolerates them for ever
		}
		if wait := deadline.Sub(now); wait > 0 {
			next = minPositive(next, wait)
			continue
		}
		if err := c.deletePod(ctx, p, now); err != nil {
			errs = append(errs, err)
		}
	}
	return next, errors.Join(errs...)
}

// evictionTime is when p must go from a node with the NoExecute taints,
// seen since then: now if it does not tolerate one of them, else when the
// shortest tolerationSeconds of its matching tolerations runs out. ok is
// false if it tolerates them all for ever.
func evictionTime(p *corev1.Pod, taints []corev1.Taint, since, now time.Time) (time.Time, bool) {
	var deadline time.Time
	limited := false
	for i := range taints {
		taint := &taints[i]
		tolerated := false
		for j := range p.Spec.Tolerations {
			tol := &p.Spec.Tolerations[j]
			if !tol.ToleratesTaint(klog.Background(), taint, false) {
				continue
			}
			tolerated = true
			if tol.TolerationSeconds == nil {
				continue
			}
			d := since.Add(time.Duration(max(*tol.TolerationSeconds, 0)) * time.Second)
			if !limited || d.Before(deadline) {
				deadline, limited = d, true
			}
		}
		if !tolerated {
			return now, true
		}
	}
	return deadline, limited
}

// deletePod marks the pod as a disruption target and deletes it, as kube's
// taint eviction does.
func (c *Controller) deletePod(ctx context.Context, p *corev1.Pod, now time.Time) error {
	c.recorder.Eventf(ctx, eventrecord.Ref(p, podKind), corev1.EventTypeNormal, ReasonTaintEviction, "", "Marking for deletion Pod %s/%s", p.Namespace, p.Name)
	upd := p.DeepCopy()
	cond := corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: ReasonDeletionByTaints,
		Message: "Taint manager: deleting due to NoExecute taint", LastTransitionTime: metav1.NewTime(now)}
	replaced := false
	for i := range upd.Status.Conditions {
		if upd.Status.Conditions[i].Type == corev1.DisruptionTarget {
			upd.Status.Conditions[i], replaced = cond, true
		}
	}
	if !replaced {
		upd.Status.Conditions = append(upd.Status.Conditions, cond)
	}
	if _, err := c.client.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, upd, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
		c.log.Debug("disruption condition not written", "pod", p.Namespace+"/"+p.Name, "err", err)
	}
	uid := p.UID
	err := c.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("nodelifecycle: evict pod %s/%s: %w", p.Namespace, p.Name, err)
	}
	c.log.Info("evicted pod from tainted node", "pod", p.Namespace+"/"+p.Name, "node", p.Spec.NodeName)
	return nil
}

func minPositive(a, b time.Duration) time.Duration {
	switch {
	case a <= 0:
		return max(b, time.Millisecond)
	case b <= 0:
		return a
	}
	return min(a, b)
}
