package daemonset

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cairn-dev/cairn/events/consumer"
	"github.com/cairn-dev/cairn/services/controllers/podcontrol"
	"github.com/cairn-dev/cairn/services/eventrecord"
)

var _ consumer.Reconciler = (*Controller)(nil)

// Event reasons, as kube's DaemonSet controller and pod control record
// them on the DaemonSet.
const (
	ReasonSuccessfulCreate   = "SuccessfulCreate"
	ReasonFailedCreate       = "FailedCreate"
	ReasonSuccessfulDelete   = "SuccessfulDelete"
	ReasonFailedDelete       = "FailedDelete"
	ReasonFailedDaemonPod    = "FailedDaemonPod"
	ReasonSucceededDaemonPod = "SucceededDaemonPod"
	ReasonSelectingAll       = "SelectingAll"
)

// round is what one reconcile of a DaemonSet works with.
type round struct {
	key   string
	ds    *appsv1.DaemonSet
	place *placement
	nodes []*corev1.Node
	// byNode is the DaemonSet's pods by target node, without the deleted
	// terminal ones; every node that should run a pod has an entry.
	byNode map[string][]*corev1.Pod
	hash   string
	gen    *int64
	now    time.Time
	// requeue is the shortest wait a back-off asked for.
	requeue time.Duration
}

func (r *round) requeueAfter(d time.Duration) {
	if d > 0 && (r.requeue == 0 || d < r.requeue) {
		r.requeue = d
	}
}

// Reconcile runs one round for the DaemonSet req.Key (see the package
// documentation). An error means retry with back-off; ctx carries the
// cause into every write.
func (c *Controller) Reconcile(ctx context.Context, req consumer.Request) (consumer.Result, error) {
	ns, name := req.NamespaceName()
	ds, ok := c.dsets.Get(ns, name)
	if !ok {
		c.expect.Forget(req.Key)
		return consumer.Result{}, nil
	}
	if ds.Spec.Selector == nil || reflect.DeepEqual(*ds.Spec.Selector, metav1.LabelSelector{}) {
		c.event(ctx, ds, corev1.EventTypeWarning, ReasonSelectingAll, "This daemon set is selecting all pods. A non-empty selector is required.")
		return consumer.Result{}, nil
	}
	sel, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
	if err != nil {
		return consumer.Result{}, consumer.TerminalError(fmt.Errorf("daemonset: %s: selector: %w", req.Key, err))
	}
	if ds.DeletionTimestamp != nil {
		return consumer.Result{}, nil
	}
	place, err := newPlacement(ds)
	if err != nil {
		return consumer.Result{}, consumer.TerminalError(err)
	}
	// Expectations before the pods: pods read after are at least as new.
	satisfied, expireIn := c.expect.Satisfied(req.Key)
	a := c.newAdoption(ds)
	pods, err := c.claimPods(ctx, a, sel)
	if err != nil {
		return consumer.Result{}, err
	}
	cur, old, err := c.constructHistory(ctx, a, sel, pods)
	if err != nil {
		return consumer.Result{}, err
	}
	r := &round{key: req.Key, ds: ds, place: place, nodes: c.nodes.List(labels.Everything()),
		hash: cur.Labels[appsv1.DefaultDaemonSetUniqueLabelKey], gen: templateGeneration(ds), now: c.now()}
	r.byNode = c.podsByNode(r, pods)

	if !satisfied {
		if err := c.updateStatus(ctx, r, false); err != nil {
			return consumer.Result{}, err
		}
		return consumer.Result{RequeueAfter: expireIn}, nil
	}
	var errs []error
	failed, err := c.manage(ctx, r)
	errs = append(errs, err)
	if err == nil {
		if ok, _ := c.expect.Satisfied(req.Key); ok && ds.Spec.UpdateStrategy.Type == appsv1.RollingUpdateDaemonSetStrategyType {
			errs = append(errs, c.rollingUpdate(ctx, r))
		}
		errs = append(errs, c.cleanupHistory(ctx, ds, old, pods))
	}
	errs = append(errs, c.updateStatus(ctx, r, true))
	if err := errors.Join(errs...); err != nil {
		return consumer.Result{}, err
	}
	if failed > 0 {
		// A kill-recreate loop with a kubelet that rejects the pod: back
		// off through the queue's rate limiter, as kube does.
		return consumer.Result{}, fmt.Errorf("daemonset: %s: deleted %d failed pods", req.Key, failed)
	}
	return consumer.Result{RequeueAfter: r.requeue}, nil
}

// podsByNode groups pods by their target node, leaving out the terminal
// pods already deleted, and gives every node that should run a daemon pod
// an entry (kube's getNodesToDaemonPods and updatedDesiredNodeCounts).
func (c *Controller) podsByNode(r *round, pods []*corev1.Pod) map[string][]*corev1.Pod {
	out := map[string][]*corev1.Pod{}
	for _, p := range pods {
		if p.DeletionTimestamp != nil && (p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded) {
			continue
		}
		node, err := targetNode(p)
		if err != nil {
			c.log.Warn("daemon pod without a target node", "key", r.key, "pod", p.Name)
			continue
		}
		out[node] = append(out[node], p)
	}
	for _, n := range r.nodes {
		if run, _ := r.place.shouldRun(n); run {
			if _, ok := out[n.Name]; !ok {
				out[n.Name] = nil
			}
		}
	}
	return out
}

// manage creates the missing daemon pods and deletes the ones that should
// not be there (kube's manage). It returns how many failed pods it deleted.
func (c *Controller) manage(ctx context.Context, r *round) (int, error) {
	var (
		need   []string
		delete []*corev1.Pod
		failed int
	)
	known := make(map[string]bool, len(r.nodes))
	for _, n := range r.nodes {
		known[n.Name] = true
		add, del, f := c.podsOnNode(ctx, r, n)
		if add {
			need = append(need, n.Name)
		}
		delete = append(delete, del...)
		failed += f
	}
	// Pods for nodes that do not exist: kube deletes the unscheduled ones
	// and leaves bound ones to the pod garbage collector; cairn has none,
	// so both go.
	for node, pods := range r.byNode {
		if known[node] {
			continue
		}
		for _, p := range pods {
			if p.DeletionTimestamp == nil {
				delete = append(delete, p)
			}
		}
	}
	return failed, c.syncNodes(ctx, r, delete, need)
}

// podsOnNode decides for one node (kube's podsShouldBeOnNode): whether it
// needs a daemon pod, which of its pods to delete, and how many failed
// pods it found.
func (c *Controller) podsOnNode(ctx context.Context, r *round, node *corev1.Node) (add bool, del []*corev1.Pod, failed int) {
	ds := r.ds
	run, cont := r.place.shouldRun(node)
	pods, exists := r.byNode[node.Name]
	switch {
	case run && len(pods) == 0:
		return true, nil, 0
	case cont:
		var running []*corev1.Pod
		for _, p := range pods {
			if p.DeletionTimestamp != nil {
				continue
			}
			if p.Status.Phase != corev1.PodFailed && p.Status.Phase != corev1.PodSucceeded {
				running = append(running, p)
				continue
			}
			if p.Status.Phase == corev1.PodFailed {
				failed++
				key := string(ds.UID) + "/" + node.Name
				if c.backoff.IsInBackOffSinceUpdate(key, r.now) {
					r.requeueAfter(c.backoff.Get(key))
					continue
				}
				c.backoff.Next(key, r.now)
				c.event(ctx, ds, corev1.EventTypeWarning, ReasonFailedDaemonPod,
					fmt.Sprintf("Found failed daemon pod %s/%s on node %s, will try to kill it", p.Namespace, p.Name, node.Name))
			} else {
				c.event(ctx, ds, corev1.EventTypeNormal, ReasonSucceededDaemonPod,
					fmt.Sprintf("Found succeeded daemon pod %s/%s on node %s, will try to delete it", p.Namespace, p.Name, node.Name))
			}
			del = append(del, p)
		}
		if !allowsSurge(ds) {
			if len(running) > 1 {
				sortOldestFirst(running)
				del = append(del, running[1:]...)
			}
			return false, del, failed
		}
		if len(running) <= 1 {
			// Surging: a node whose pods all went needs a new one.
			return len(running) == 0 && run, del, failed
		}
		// Two pods are kept only while the oldest new one is not yet
		// available and the oldest old one is ready.
		sortOldestFirst(running)
		var newest, oldest *corev1.Pod
		for _, p := range running {
			switch {
			case p.Labels[appsv1.DefaultDaemonSetUniqueLabelKey] == r.hash && newest == nil:
				newest = p
			case p.Labels[appsv1.DefaultDaemonSetUniqueLabelKey] != r.hash && oldest == nil:
				oldest = p
			default:
				del = append(del, p)
			}
		}
		if newest != nil && oldest != nil {
			if !isReady(oldest) || available(newest, ds.Spec.MinReadySeconds, r.now) {
				del = append(del, oldest)
			}
		}
		return false, del, failed
	case exists:
		// The node should not run it: every pod goes.
		for _, p := range pods {
			if p.DeletionTimestamp == nil {
				del = append(del, p)
			}
		}
	}
	return false, del, failed
}

// sortOldestFirst orders pods bound ones first, then oldest first, then
// by name (kube's podByCreationTimestampAndPhase).
func sortOldestFirst(pods []*corev1.Pod) {
	slices.SortStableFunc(pods, func(a, b *corev1.Pod) int {
		if (a.Spec.NodeName != "") != (b.Spec.NodeName != "") {
			if a.Spec.NodeName != "" {
				return -1
			}
			return 1
		}
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			if a.CreationTimestamp.Before(&b.CreationTimestamp) {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Name, b.Name)
	})
}

// syncNodes deletes pods and creates a pod on each of nodes, at most
// burstReplicas of each, after setting expectations (kube's syncNodes).
// Creates go in slow-start batches (1, 2, 4, ...) and stop at the first
// failing batch.
func (c *Controller) syncNodes(ctx context.Context, r *round, del []*corev1.Pod, nodes []string) error {
	ds := r.ds
	nodes = nodes[:min(len(nodes), burstReplicas)]
	del = del[:min(len(del), burstReplicas)]
	uids := make([]types.UID, len(del))
	for i, p := range del {
		uids[i] = p.UID
	}
	c.expect.Expect(r.key, ds.UID, len(nodes), uids)
	if len(nodes) > 0 || len(del) > 0 {
		c.log.Debug("syncing nodes", "key", r.key, "create", len(nodes), "delete", len(del))
	}

	template := podTemplate(ds, r.gen, r.hash)
	next := 0
	var mu sync.Mutex
	created, createErr := podcontrol.SlowStart(len(nodes), 1, func() error {
		mu.Lock()
		node := nodes[next]
		next++
		mu.Unlock()
		err := c.createPod(ctx, ds, template, node)
		if err != nil {
			c.expect.CreationObserved(r.key, ds.UID)
		}
		return err
	})
	// Creates never attempted will never be observed.
	for range len(nodes) - created - countErrs(createErr) {
		c.expect.CreationObserved(r.key, ds.UID)
	}

	var (
		wg   sync.WaitGroup
		errs []error
	)
	for _, p := range del {
		wg.Go(func() {
			err := c.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &p.UID}})
			if err == nil {
				c.event(ctx, ds, corev1.EventTypeNormal, ReasonSuccessfulDelete, "Deleted pod: "+p.Name)
				return
			}
			c.expect.DeletionObserved(r.key, ds.UID, p.UID)
			if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
				return
			}
			c.event(ctx, ds, corev1.EventTypeWarning, ReasonFailedDelete, fmt.Sprintf("Error deleting: %v", err))
			mu.Lock()
			errs = append(errs, fmt.Errorf("delete pod %s: %w", p.Name, err))
			mu.Unlock()
		})
	}
	wg.Wait()
	if err := errors.Join(append(errs, createErr)...); err != nil {
		return fmt.Errorf("daemonset: %s: %w", r.key, err)
	}
	return nil
}

// countErrs is the number of errors joined in err.
func countErrs(err error) int {
	if err == nil {
		return 0
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return len(j.Unwrap())
	}
	return 1
}

// createPod creates the daemon pod for node: the template, with the node
// affinity term that makes the default scheduler bind it there.
func (c *Controller) createPod(ctx context.Context, ds *appsv1.DaemonSet, template *corev1.PodTemplateSpec, node string) error {
	t := template.DeepCopy()
	t.Spec.Affinity = nodeAffinityFor(t.Spec.Affinity, node)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName:    ds.Name + "-",
			Namespace:       ds.Namespace,
			Labels:          t.Labels,
			Annotations:     t.Annotations,
			Finalizers:      t.Finalizers,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(ds, controllerKind)},
		},
		Spec: t.Spec,
	}
	out, err := c.client.CoreV1().Pods(ds.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	switch {
	case err == nil:
		c.event(ctx, ds, corev1.EventTypeNormal, ReasonSuccessfulCreate, "Created pod: "+out.Name)
	case apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
		return nil
	default:
		c.event(ctx, ds, corev1.EventTypeWarning, ReasonFailedCreate, fmt.Sprintf("Error creating: %v", err))
		return fmt.Errorf("create pod on node %s: %w", node, err)
	}
	return nil
}

// event records an Event about ds; ctx carries the cause.
func (c *Controller) event(ctx context.Context, ds *appsv1.DaemonSet, typ, reason, msg string) {
	c.recorder.Event(ctx, eventrecord.Ref(ds, controllerKind), typ, reason, "", msg)
}
