package pvcprotection

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/events/consumer"
	"github.com/cairn-dev/cairn/schemas"
)

// Name is the controller's name in logs and metrics.
const Name = "pvcprotection"

// IndexClaim indexes pods by the keys (namespace/name) of the claims
// their volumes name, ephemeral ones included (kube's PodPVCIndex).
const IndexClaim = "pod-pvc"

// RecheckInUse is how often a claim being deleted but in use is looked at
// again when the pod cache is partial (a sharded manager).
const RecheckInUse = 5 * time.Second

var (
	claimsResource = corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims")
	podsResource   = corev1.SchemeGroupVersion.WithResource("pods")
)

// Options configure the controller.
type Options struct {
	// Workers is the number of claims handled at once; 0 means 5.
	Workers int
}

// Controller is the PVC protection controller. Build it with New; its
// Manager runs it.
type Controller struct {
	log    *slog.Logger
	client kubernetes.Interface
	claims *consumer.Cache[*corev1.PersistentVolumeClaim]
	pods   *consumer.Cache[*corev1.Pod]
}

// PodIndexers are the pod cache's indexes this controller needs.
func PodIndexers() map[string]consumer.IndexFunc[*corev1.Pod] {
	return map[string]consumer.IndexFunc[*corev1.Pod]{IndexClaim: claimKeys}
}

// New builds the controller on m's claim cache, pod cache (Partitioned)
// and client.
func New(m *consumer.Manager, opts Options) (*Controller, error) {
	if opts.Workers <= 0 {
		opts.Workers = 5
	}
	claims, err := consumer.CacheFor[*corev1.PersistentVolumeClaim](m, claimsResource)
	if err != nil {
		return nil, fmt.Errorf("pvcprotection: new: %w", err)
	}
	pods, err := consumer.CacheFor[*corev1.Pod](m, podsResource, consumer.Partitioned(), consumer.WithIndexers(PodIndexers()))
	if err != nil {
		return nil, fmt.Errorf("pvcprotection: new: %w", err)
	}
	c := &Controller{log: m.Log().With("controller", Name), client: m.Client(), claims: claims, pods: pods}
	ctrl, err := m.NewController(consumer.ControllerConfig{Name: Name, Reconciler: c, Workers: opts.Workers,
		WaitFor: []consumer.Syncer{claims, pods}})
	if err != nil {
		return nil, fmt.Errorf("pvcprotection: new: %w", err)
	}
	consumer.For(claims, ctrl, func(pvc *corev1.PersistentVolumeClaim) []string {
		if !needsFinalizer(pvc) && !isDeletionCandidate(pvc) {
			return nil
		}
		return []string{consumer.KeyOf(pvc)}
	})
	enqueue := func(pod *corev1.Pod, deleted bool, ev *events.Event) {
		// kube's enqueuePVCs: a running, scheduled pod frees no claim.
		if !deleted && !podTerminated(pod) && pod.Spec.NodeName != "" {
			return
		}
		for _, k := range claimKeys(pod) {
			ctrl.Enqueue(k, ev)
		}
	}
	pods.AddHandler(consumer.Handler[*corev1.Pod]{
		OnAdd: func(p *corev1.Pod, ev *events.Event) { enqueue(p, false, ev) },
		OnUpdate: func(old, p *corev1.Pod, ev *events.Event) {
			enqueue(p, false, ev)
			if old.UID != p.UID { // a pod replaced under the same name
				enqueue(old, true, ev)
			}
		},
		OnDelete: func(p *corev1.Pod, ev *events.Event) { enqueue(p, true, ev) },
	})
	return c, nil
}

var _ consumer.Reconciler = (*Controller)(nil)

// Reconcile is kube's processPVC for claim req.Key.
func (c *Controller) Reconcile(ctx context.Context, req consumer.Request) (consumer.Result, error) {
	ns, name := req.NamespaceName()
	pvc, ok := c.claims.Get(ns, name)
	if !ok {
		return consumer.Result{}, nil
	}
	if isDeletionCandidate(pvc) {
		used, err := c.isBeingUsed(ctx, pvc)
		if err != nil {
			return consumer.Result{}, err
		}
		if !used {
			return consumer.Result{}, c.setFinalizer(ctx, pvc, false)
		}
		c.log.Debug("keeping claim in use", "key", req.Key)
		if c.pods.Partial() {
			return consumer.Result{RequeueAfter: RecheckInUse}, nil
		}
		return consumer.Result{}, nil
	}
	if needsFinalizer(pvc) {
		return consumer.Result{}, c.setFinalizer(ctx, pvc, true)
	}
	return consumer.Result{}, nil
}

// setFinalizer adds or removes the finalizer with an update carrying the
// cached resourceVersion: a conflict is retried on the newer claim.
func (c *Controller) setFinalizer(ctx context.Context, pvc *corev1.PersistentVolumeClaim, add bool) error {
	clone := pvc.DeepCopy()
	if add {
		clone.Finalizers = append(clone.Finalizers, schemas.PVCProtectionFinalizer)
	} else {
		clone.Finalizers = slices.DeleteFunc(clone.Finalizers, func(f string) bool { return f == schemas.PVCProtectionFinalizer })
	}
	_, err := c.client.CoreV1().PersistentVolumeClaims(pvc.Namespace).Update(ctx, clone, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("pvcprotection: update %s/%s: %w", pvc.Namespace, pvc.Name, err)
	}
	c.log.Info("claim protection finalizer", "key", consumer.KeyOf(pvc), "added", add)
	return nil
}

// isBeingUsed asks the pod cache, then a live list of the namespace's
// pods (kube's askInformer, askAPIServer).
func (c *Controller) isBeingUsed(ctx context.Context, pvc *corev1.PersistentVolumeClaim) (bool, error) {
	for _, pod := range c.pods.ByIndex(IndexClaim, consumer.KeyOf(pvc)) {
		if PodUsesClaim(pod, pvc) {
			return true, nil
		}
	}
	list, err := c.client.CoreV1().Pods(pvc.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, fmt.Errorf("pvcprotection: list pods of %s: %w", pvc.Namespace, err)
	}
	for i := range list.Items {
		if PodUsesClaim(&list.Items[i], pvc) {
			return true, nil
		}
	}
	return false, nil
}

// PodUsesClaim is kube's podUsesPVC.
func PodUsesClaim(pod *corev1.Pod, pvc *corev1.PersistentVolumeClaim) bool {
	// Only a scheduled pod: the kubelet sees pods once they are, and does
	// not start one whose claim is being deleted.
	if pod.Spec.NodeName == "" || pod.Namespace != pvc.Namespace {
		return false
	}
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		if v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == pvc.Name {
			return true
		}
		if v.Ephemeral != nil && !podIsShutDown(pod) && schemas.EphemeralClaimName(pod, v) == pvc.Name && metav1.IsControlledBy(pvc, pod) {
			return true
		}
	}
	return false
}

// claimKeys are the keys of the claims pod's volumes name.
func claimKeys(pod *corev1.Pod) []string {
	var keys []string
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		switch {
		case v.PersistentVolumeClaim != nil:
			keys = append(keys, consumer.Key(pod.Namespace, v.PersistentVolumeClaim.ClaimName))
		case v.Ephemeral != nil:
			keys = append(keys, consumer.Key(pod.Namespace, schemas.EphemeralClaimName(pod, v)))
		}
	}
	return keys
}

// podIsShutDown: the kubelet is done with the pod or it was force-deleted
// (deleted with a zero grace period); considering its claims unused breaks
// a cycle of a pod finalizer waiting for its claim.
func podIsShutDown(pod *corev1.Pod) bool {
	return pod.DeletionTimestamp != nil && pod.DeletionGracePeriodSeconds != nil && *pod.DeletionGracePeriodSeconds == 0
}

// podTerminated is kube's volumeutil.IsPodTerminated: the pod failed or
// succeeded, or is being deleted and no container runs.
func podTerminated(pod *corev1.Pod) bool {
	if pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded {
		return true
	}
	if pod.DeletionTimestamp == nil {
		return false
	}
	for _, s := range pod.Status.ContainerStatuses {
		if s.State.Running != nil {
			return false
		}
	}
	return true
}

func needsFinalizer(pvc *corev1.PersistentVolumeClaim) bool {
	return pvc.DeletionTimestamp == nil && !slices.Contains(pvc.Finalizers, schemas.PVCProtectionFinalizer)
}

func isDeletionCandidate(pvc *corev1.PersistentVolumeClaim) bool {
	return pvc.DeletionTimestamp != nil && slices.Contains(pvc.Finalizers, schemas.PVCProtectionFinalizer)
}
