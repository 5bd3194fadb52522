package persistentvolume

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/events/consumer"
	"github.com/cairn-dev/cairn/services/eventrecord"
)

// Name is the controller's name in logs; its two queues are Name-claims
// and Name-volumes.
const Name = "persistentvolume-binder"

// Component is the source of the controller's Events, as kube's.
const Component = "persistentvolume-controller"

// DefaultResync is how often unbound claims and volumes are synced again
// without a change (kube's --pvclaimbinder-sync-period).
const DefaultResync = 15 * time.Second

var (
	claimsResource  = corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims")
	volumesResource = corev1.SchemeGroupVersion.WithResource("persistentvolumes")
	classesResource = storagev1.SchemeGroupVersion.WithResource("storageclasses")
	claimKind       = corev1.SchemeGroupVersion.WithKind("PersistentVolumeClaim")
	volumeKind      = corev1.SchemeGroupVersion.WithKind("PersistentVolume")
)

// Options configure the controller.
type Options struct {
	// Workers per queue; 0 means 5.
	Workers int
	// Resync is the period of the unbound objects' re-sync; 0 means
	// DefaultResync.
	Resync time.Duration
	// Clock is the time source; nil is time.Now.
	Clock func() time.Time
}

// Controller is kube's PersistentVolume controller: two reconcilers, one
// for claims (syncClaim) and one for volumes (syncVolume), on one
// Manager's caches.
type Controller struct {
	log      *slog.Logger
	now      func() time.Time
	resync   time.Duration
	client   kubernetes.Interface
	claims   *consumer.Cache[*corev1.PersistentVolumeClaim]
	volumes  *consumer.Cache[*corev1.PersistentVolume]
	classes  *consumer.Cache[*storagev1.StorageClass]
	claimQ   *consumer.Controller
	volumeQ  *consumer.Controller
	recorder *eventrecord.Recorder
	// written hold the objects this controller wrote until the caches
	// show them (kube's storeObjectUpdate), so that a round right after a
	// write does not act on the state before it.
	writtenClaims  *overlay[*corev1.PersistentVolumeClaim]
	writtenVolumes *overlay[*corev1.PersistentVolume]
}

// New builds the controller on m.
func New(m *consumer.Manager, opts Options) (*Controller, error) {
	if opts.Workers <= 0 {
		opts.Workers = 5
	}
	if opts.Resync <= 0 {
		opts.Resync = DefaultResync
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	c := &Controller{log: m.Log().With("controller", Name), now: opts.Clock, resync: opts.Resync, client: m.Client(),
		writtenClaims: newOverlay[*corev1.PersistentVolumeClaim](), writtenVolumes: newOverlay[*corev1.PersistentVolume]()}
	var err error
	if c.recorder, err = eventrecord.ForManager(m, eventrecord.Config{Component: Component, Now: opts.Clock, Log: c.log}, 0, 0); err != nil {
		return nil, fmt.Errorf("persistentvolume: new: %w", err)
	}
	if c.claims, err = consumer.CacheFor[*corev1.PersistentVolumeClaim](m, claimsResource); err != nil {
		return nil, fmt.Errorf("persistentvolume: new: %w", err)
	}
	if c.volumes, err = consumer.CacheFor[*corev1.PersistentVolume](m, volumesResource); err != nil {
		return nil, fmt.Errorf("persistentvolume: new: %w", err)
	}
	if c.classes, err = consumer.CacheFor[*storagev1.StorageClass](m, classesResource); err != nil {
		return nil, fmt.Errorf("persistentvolume: new: %w", err)
	}
	wait := []consumer.Syncer{c.claims, c.volumes, c.classes}
	if c.claimQ, err = m.NewController(consumer.ControllerConfig{Name: Name + "-claims", Workers: opts.Workers, WaitFor: wait,
		Reconciler: consumer.ReconcilerFunc(c.reconcileClaim)}); err != nil {
		return nil, fmt.Errorf("persistentvolume: new: %w", err)
	}
	if c.volumeQ, err = m.NewController(consumer.ControllerConfig{Name: Name + "-volumes", Workers: opts.Workers, WaitFor: wait,
		Reconciler: consumer.ReconcilerFunc(c.reconcileVolume)}); err != nil {
		return nil, fmt.Errorf("persistentvolume: new: %w", err)
	}
	consumer.For(c.claims, c.claimQ, nil)
	consumer.For(c.volumes, c.volumeQ, nil)
	// A claim's change syncs its volume; a volume's change syncs its
	// claim and, for a volume that became free, the claims waiting.
	consumer.Watch(c.claims, c.volumeQ, func(pvc *corev1.PersistentVolumeClaim) []string {
		if pvc.Spec.VolumeName == "" {
			return nil
		}
		return []string{pvc.Spec.VolumeName}
	})
	consumer.Watch(c.volumes, c.claimQ, c.claimsOfVolume)
	// A class created after its claims lets them provision.
	c.classes.AddHandler(consumer.Handler[*storagev1.StorageClass]{
		OnAdd:    func(sc *storagev1.StorageClass, ev *events.Event) { c.enqueueUnbound(ev) },
		OnUpdate: func(_, sc *storagev1.StorageClass, ev *events.Event) { c.enqueueUnbound(ev) },
	})
	return c, nil
}

func (c *Controller) claimsOfVolume(pv *corev1.PersistentVolume) []string {
	if ref := pv.Spec.ClaimRef; ref != nil {
		return []string{consumer.Key(ref.Namespace, ref.Name)}
	}
	if pv.Status.Phase != corev1.VolumeAvailable {
		return nil
	}
	return c.unboundClaims()
}

func (c *Controller) unboundClaims() []string {
	var keys []string
	for _, pvc := range c.claims.List(nil) {
		if pvc.Spec.VolumeName == "" && pvc.DeletionTimestamp == nil {
			keys = append(keys, consumer.KeyOf(pvc))
		}
	}
	return keys
}

func (c *Controller) enqueueUnbound(ev *events.Event) {
	for _, k := range c.unboundClaims() {
		c.claimQ.Enqueue(k, ev)
	}
}

// claim is the newest known state of a claim: the cache's, or this
// controller's last write if the cache has not caught up with it.
func (c *Controller) claim(ns, name string) (*corev1.PersistentVolumeClaim, bool) {
	obj, ok := c.claims.Get(ns, name)
	return c.writtenClaims.newest(consumer.Key(ns, name), obj, ok)
}

func (c *Controller) volume(name string) (*corev1.PersistentVolume, bool) {
	obj, ok := c.volumes.Get("", name)
	return c.writtenVolumes.newest(name, obj, ok)
}

func (c *Controller) class(name string) (*storagev1.StorageClass, bool) {
	if name == "" {
		return nil, false
	}
	return c.classes.Get("", name)
}

func (c *Controller) reconcileClaim(ctx context.Context, req consumer.Request) (consumer.Result, error) {
	ns, name := req.NamespaceName()
	pvc, ok := c.claim(ns, name)
	if !ok {
		c.writtenClaims.forget(req.Key)
		return consumer.Result{}, nil
	}
	if err := c.syncClaim(ctx, pvc); err != nil {
		return consumer.Result{}, err
	}
	if pvc, ok = c.claim(ns, name); ok && pvc.Status.Phase != corev1.ClaimBound {
		return consumer.Result{RequeueAfter: c.resync}, nil
	}
	return consumer.Result{}, nil
}

func (c *Controller) reconcileVolume(ctx context.Context, req consumer.Request) (consumer.Result, error) {
	pv, ok := c.volume(req.Key)
	if !ok {
		c.writtenVolumes.forget(req.Key)
		return consumer.Result{}, nil
	}
	if err := c.syncVolume(ctx, pv); err != nil {
		return consumer.Result{}, err
	}
	if pv, ok = c.volume(req.Key); ok && pv.Status.Phase != corev1.VolumeBound {
		return consumer.Result{RequeueAfter: c.resync}, nil
	}
	return consumer.Result{}, nil
}

func (c *Controller) event(ctx context.Context, obj interface {
	GetNamespace() string
	GetName() string
}, typ, reason, msg string) {
	switch o := obj.(type) {
	case *corev1.PersistentVolumeClaim:
		c.recorder.Event(ctx, eventrecord.Ref(o, claimKind), typ, reason, "", msg)
	case *corev1.PersistentVolume:
		c.recorder.Event(ctx, eventrecord.Ref(o, volumeKind), typ, reason, "", msg)
	}
}
