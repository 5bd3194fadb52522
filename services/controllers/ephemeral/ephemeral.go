package ephemeral

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/events/consumer"
	"github.com/cairn-dev/cairn/schemas"
	"github.com/cairn-dev/cairn/services/eventrecord"
)

// Name is the controller's name in logs and metrics.
const Name = "ephemeral-volume"

// Component is the source of its Events, as kube's.
const Component = "ephemeral_volume"

var (
	claimsResource = corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims")
	podsResource   = corev1.SchemeGroupVersion.WithResource("pods")
	podKind        = corev1.SchemeGroupVersion.WithKind("Pod")
)

// Options configure the controller.
type Options struct {
	// Workers is the number of pods handled at once; 0 means 5.
	Workers int
}

// Controller is the ephemeral volume controller. Build it with New; its
// Manager runs it.
type Controller struct {
	log      *slog.Logger
	client   kubernetes.Interface
	claims   *consumer.Cache[*corev1.PersistentVolumeClaim]
	pods     *consumer.Cache[*corev1.Pod]
	recorder *eventrecord.Recorder
}

// New builds the controller on m's claim cache, pod cache (Partitioned),
// client and recorder.
func New(m *consumer.Manager, opts Options) (*Controller, error) {
	if opts.Workers <= 0 {
		opts.Workers = 5
	}
	log := m.Log().With("controller", Name)
	claims, err := consumer.CacheFor[*corev1.PersistentVolumeClaim](m, claimsResource)
	if err != nil {
		return nil, fmt.Errorf("ephemeral: new: %w", err)
	}
	pods, err := consumer.CacheFor[*corev1.Pod](m, podsResource, consumer.Partitioned())
	if err != nil {
		return nil, fmt.Errorf("ephemeral: new: %w", err)
	}
	recorder, err := eventrecord.ForManager(m, eventrecord.Config{Component: Component, Log: log}, 0, 0)
	if err != nil {
		return nil, fmt.Errorf("ephemeral: new: %w", err)
	}
	c := &Controller{log: log, client: m.Client(), claims: claims, pods: pods, recorder: recorder}
	cfg := consumer.ControllerConfig{Name: Name, Reconciler: c, Workers: opts.Workers, WaitFor: []consumer.Syncer{claims, pods}}
	// A pod is the key of the replica that owns its controller's key.
	if owns, guard := m.Owns(), m.Guard(); owns != nil {
		cfg.Owns = func(key string) bool { return owns(c.shardKey(key)) }
		if guard != nil {
			cfg.Guard = func(key string) (func(), bool) { return guard(c.shardKey(key)) }
		}
	}
	ctrl, err := m.NewController(cfg)
	if err != nil {
		return nil, fmt.Errorf("ephemeral: new: %w", err)
	}
	consumer.For(pods, ctrl, func(p *corev1.Pod) []string {
		if p.DeletionTimestamp != nil || !hasEphemeral(p) {
			return nil
		}
		return []string{consumer.KeyOf(p)}
	})
	// A claim deleted while its pod lives is made again (kube's onPVCDelete).
	claims.AddHandler(consumer.Handler[*corev1.PersistentVolumeClaim]{
		OnDelete: func(pvc *corev1.PersistentVolumeClaim, ev *events.Event) {
			if ref := metav1.GetControllerOfNoCopy(pvc); ref != nil && ref.Kind == podKind.Kind && ref.APIVersion == "v1" {
				ctrl.Enqueue(consumer.Key(pvc.Namespace, ref.Name), ev)
			}
		},
	})
	return c, nil
}

// shardKey is the key whose partition holds pod key: its controller's,
// or its own.
func (c *Controller) shardKey(key string) string {
	ns, name := consumer.SplitKey(key)
	if pod, ok := c.pods.Get(ns, name); ok {
		if ref := metav1.GetControllerOfNoCopy(pod); ref != nil {
			return consumer.Key(ns, ref.Name)
		}
	}
	return key
}

var _ consumer.Reconciler = (*Controller)(nil)

// Reconcile is kube's syncHandler for pod req.Key.
func (c *Controller) Reconcile(ctx context.Context, req consumer.Request) (consumer.Result, error) {
	ns, name := req.NamespaceName()
	pod, ok := c.pods.Get(ns, name)
	if !ok || pod.DeletionTimestamp != nil {
		return consumer.Result{}, nil
	}
	var errs []error
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		if err := c.handleVolume(ctx, pod, v); err != nil {
			errs = append(errs, err)
			if consumer.IsExpected(err) {
				continue
			}
			c.recorder.Event(ctx, eventrecord.Ref(pod, podKind), corev1.EventTypeWarning, "FailedBinding", "",
				fmt.Sprintf("ephemeral volume %s: %v", v.Name, err))
		}
	}
	return consumer.Result{}, errors.Join(errs...)
}

// errNotForPod: a claim of the ephemeral name that the pod does not
// control (kube's VolumeIsForPod).
var errNotForPod = errors.New("ephemeral: claim not created for the pod")

// handleVolume creates the claim of v if it is an ephemeral volume whose
// claim does not exist.
func (c *Controller) handleVolume(ctx context.Context, pod *corev1.Pod, v *corev1.Volume) error {
	if v.Ephemeral == nil || v.Ephemeral.VolumeClaimTemplate == nil {
		return nil
	}
	name := schemas.EphemeralClaimName(pod, v)
	if pvc, ok := c.claims.Get(pod.Namespace, name); ok {
		if !metav1.IsControlledBy(pvc, pod) {
			return fmt.Errorf("PVC %s/%s was not created for pod %s/%s (pod is not owner): %w", pod.Namespace, name, pod.Namespace, pod.Name, errNotForPod)
		}
		return nil
	}
	t := v.Ephemeral.VolumeClaimTemplate
	yes := true
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Labels: t.Labels, Annotations: t.Annotations,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: podKind.Kind, Name: pod.Name, UID: pod.UID,
				Controller: &yes, BlockOwnerDeletion: &yes}},
		},
		Spec: *t.Spec.DeepCopy(),
	}
	_, err := c.client.CoreV1().PersistentVolumeClaims(pod.Namespace).Create(ctx, pvc, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		// The cache lags: retried once it shows whose claim it is.
		return consumer.ExpectedError(fmt.Errorf("create PVC %s: %w", name, err))
	}
	if err != nil {
		return fmt.Errorf("create PVC %s: %w", name, err)
	}
	c.log.Info("created ephemeral claim", "pod", consumer.KeyOf(pod), "claim", name)
	return nil
}

func hasEphemeral(pod *corev1.Pod) bool {
	for i := range pod.Spec.Volumes {
		if pod.Spec.Volumes[i].Ephemeral != nil {
			return true
		}
	}
	return false
}
