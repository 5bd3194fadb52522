package csiprovisioner

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
	"github.com/cairn-dev/cairn/services/controllers/csiconn"
	"github.com/cairn-dev/cairn/services/eventrecord"
)

// Name is the controller's name in logs; its queues are Name-claims and
// Name-volumes.
const Name = "csi-provisioner"

// Finalizer is external-provisioner's on the volumes it made with reclaim
// policy Delete: the PV object stays until DeleteVolume succeeded.
const Finalizer = "external-provisioner.volume.kubernetes.io/finalizer"

// DefaultTimeout bounds one CSI call (external-provisioner's --timeout).
const DefaultTimeout = 15 * time.Second

var (
	claimsResource   = corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims")
	volumesResource  = corev1.SchemeGroupVersion.WithResource("persistentvolumes")
	nodesResource    = corev1.SchemeGroupVersion.WithResource("nodes")
	classesResource  = storagev1.SchemeGroupVersion.WithResource("storageclasses")
	csiNodesResource = storagev1.SchemeGroupVersion.WithResource("csinodes")
	claimKind        = corev1.SchemeGroupVersion.WithKind("PersistentVolumeClaim")
	volumeKind       = corev1.SchemeGroupVersion.WithKind("PersistentVolume")
)

// Options configure the controller.
type Options struct {
	// Endpoints are the drivers this controller-manager provisions for:
	// driver name -> unix:///path of its controller service.
	Endpoints map[string]string
	// Workers per queue; 0 means 4.
	Workers int
	// Timeout of each CSI call; 0 means DefaultTimeout.
	Timeout time.Duration
	Clock   func() time.Time
}

// Controller is external-provisioner's controller side for every driver
// in Options.Endpoints.
type Controller struct {
	log      *slog.Logger
	timeout  time.Duration
	client   kubernetes.Interface
	pool     *csiconn.Pool
	claims   *consumer.Cache[*corev1.PersistentVolumeClaim]
	volumes  *consumer.Cache[*corev1.PersistentVolume]
	classes  *consumer.Cache[*storagev1.StorageClass]
	nodes    *consumer.Cache[*corev1.Node]
	csiNodes *consumer.Cache[*storagev1.CSINode]
	claimQ   *consumer.Controller
	volumeQ  *consumer.Controller
	recorder *eventrecord.Recorder
}

// New builds the controller on m. With no endpoints it registers nothing
// (a controller-manager without drivers has nothing to provision) and
// returns nil.
func New(m *consumer.Manager, opts Options) (*Controller, error) {
	if len(opts.Endpoints) == 0 {
		return nil, nil
	}
	if opts.Workers <= 0 {
		opts.Workers = 4
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	c := &Controller{log: m.Log().With("controller", Name), timeout: opts.Timeout, client: m.Client()}
	var err error
	if c.pool, err = csiconn.ForManager(m, opts.Endpoints); err != nil {
		return nil, fmt.Errorf("csiprovisioner: new: %w", err)
	}
	// external-provisioner's Events come from the driver's name as
	// component ("hostpath.csi.cairn.dev_<host>_<uuid>" in kube).
	if c.recorder, err = eventrecord.ForManager(m, eventrecord.Config{Component: "csi-provisioner", Now: opts.Clock, Log: c.log}, 0, 0); err != nil {
		return nil, fmt.Errorf("csiprovisioner: new: %w", err)
	}
	if c.claims, err = consumer.CacheFor[*corev1.PersistentVolumeClaim](m, claimsResource); err != nil {
		return nil, fmt.Errorf("csiprovisioner: new: %w", err)
	}
	if c.volumes, err = consumer.CacheFor[*corev1.PersistentVolume](m, volumesResource); err != nil {
		return nil, fmt.Errorf("csiprovisioner: new: %w", err)
	}
	if c.classes, err = consumer.CacheFor[*storagev1.StorageClass](m, classesResource); err != nil {
		return nil, fmt.Errorf("csiprovisioner: new: %w", err)
	}
	if c.nodes, err = consumer.CacheFor[*corev1.Node](m, nodesResource); err != nil {
		return nil, fmt.Errorf("csiprovisioner: new: %w", err)
	}
	if c.csiNodes, err = consumer.CacheFor[*storagev1.CSINode](m, csiNodesResource); err != nil {
		return nil, fmt.Errorf("csiprovisioner: new: %w", err)
	}
	wait := []consumer.Syncer{c.claims, c.volumes, c.classes, c.nodes, c.csiNodes}
	if c.claimQ, err = m.NewController(consumer.ControllerConfig{Name: Name + "-claims", Workers: opts.Workers, WaitFor: wait,
		Reconciler: consumer.ReconcilerFunc(c.reconcileClaim)}); err != nil {
		return nil, fmt.Errorf("csiprovisioner: new: %w", err)
	}
	if c.volumeQ, err = m.NewController(consumer.ControllerConfig{Name: Name + "-volumes", Workers: opts.Workers, WaitFor: wait,
		Reconciler: consumer.ReconcilerFunc(c.reconcileVolume)}); err != nil {
		return nil, fmt.Errorf("csiprovisioner: new: %w", err)
	}
	consumer.For(c.claims, c.claimQ, nil)
	consumer.For(c.volumes, c.volumeQ, nil)
	// A CSINode registering the driver lets claims waiting for topology
	// provision.
	c.csiNodes.AddHandler(consumer.Handler[*storagev1.CSINode]{
		OnAdd:    func(_ *storagev1.CSINode, ev *events.Event) { c.enqueuePending(ev) },
		OnUpdate: func(_, _ *storagev1.CSINode, ev *events.Event) { c.enqueuePending(ev) },
	})
	return c, nil
}

func (c *Controller) enqueuePending(ev *events.Event) {
	for _, pvc := range c.claims.List(nil) {
		if pvc.Spec.VolumeName == "" {
			c.claimQ.Enqueue(consumer.KeyOf(pvc), ev)
		}
	}
}

func (c *Controller) event(ctx context.Context, obj any, typ, reason, msg string) {
	switch o := obj.(type) {
	case *corev1.PersistentVolumeClaim:
		c.recorder.Event(ctx, eventrecord.Ref(o, claimKind), typ, reason, "", msg)
	case *corev1.PersistentVolume:
		c.recorder.Event(ctx, eventrecord.Ref(o, volumeKind), typ, reason, "", msg)
	}
}
