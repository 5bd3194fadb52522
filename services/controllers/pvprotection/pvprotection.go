package pvprotection

import (
	"context"
	"fmt"
	"log/slog"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cairn-dev/cairn/events/consumer"
	"github.com/cairn-dev/cairn/schemas"
)

// Name is the controller's name in logs and metrics.
const Name = "pvprotection"

var volumesResource = corev1.SchemeGroupVersion.WithResource("persistentvolumes")

// Options configure the controller.
type Options struct {
	// Workers is the number of volumes handled at once; 0 means 1.
	Workers int
}

// Controller is the PV protection controller. Build it with New; its
// Manager runs it.
type Controller struct {
	log     *slog.Logger
	client  kubernetes.Interface
	volumes *consumer.Cache[*corev1.PersistentVolume]
}

// New builds the controller on m's PersistentVolume cache and client.
func New(m *consumer.Manager, opts Options) (*Controller, error) {
	volumes, err := consumer.CacheFor[*corev1.PersistentVolume](m, volumesResource)
	if err != nil {
		return nil, fmt.Errorf("pvprotection: new: %w", err)
	}
	c := &Controller{log: m.Log().With("controller", Name), client: m.Client(), volumes: volumes}
	ctrl, err := m.NewController(consumer.ControllerConfig{Name: Name, Reconciler: c, Workers: opts.Workers,
		WaitFor: []consumer.Syncer{volumes}})
	if err != nil {
		return nil, fmt.Errorf("pvprotection: new: %w", err)
	}
	consumer.For(volumes, ctrl, func(pv *corev1.PersistentVolume) []string {
		if !needsFinalizer(pv) && !isDeletionCandidate(pv) {
			return nil
		}
		return []string{pv.Name}
	})
	return c, nil
}

var _ consumer.Reconciler = (*Controller)(nil)

// Reconcile is kube's processPV for volume req.Key.
func (c *Controller) Reconcile(ctx context.Context, req consumer.Request) (consumer.Result, error) {
	pv, ok := c.volumes.Get("", req.Key)
	if !ok {
		return consumer.Result{}, nil
	}
	switch {
	case isDeletionCandidate(pv):
		// The PV controller sets the phase; a volume Bound is in use.
		if pv.Status.Phase == corev1.VolumeBound {
			c.log.Debug("keeping bound volume", "key", req.Key)
			return consumer.Result{}, nil
		}
		return consumer.Result{}, c.setFinalizer(ctx, pv, false)
	case needsFinalizer(pv):
		return consumer.Result{}, c.setFinalizer(ctx, pv, true)
	}
	return consumer.Result{}, nil
}

// setFinalizer adds or removes the finalizer with an update carrying the
// cached resourceVersion: a conflict is retried on the newer volume.
func (c *Controller) setFinalizer(ctx context.Context, pv *corev1.PersistentVolume, add bool) error {
	clone := pv.DeepCopy()
	if add {
		clone.Finalizers = append(clone.Finalizers, schemas.PVProtectionFinalizer)
	} else {
		clone.Finalizers = slices.DeleteFunc(clone.Finalizers, func(f string) bool { return f == schemas.PVProtectionFinalizer })
	}
	_, err := c.client.CoreV1().PersistentVolumes().Update(ctx, clone, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("pvprotection: update %s: %w", pv.Name, err)
	}
	c.log.Info("volume protection finalizer", "key", pv.Name, "added", add)
	return nil
}

func needsFinalizer(pv *corev1.PersistentVolume) bool {
	return pv.DeletionTimestamp == nil && !slices.Contains(pv.Finalizers, schemas.PVProtectionFinalizer)
}

func isDeletionCandidate(pv *corev1.PersistentVolume) bool {
	return pv.DeletionTimestamp != nil && slices.Contains(pv.Finalizers, schemas.PVProtectionFinalizer)
}
