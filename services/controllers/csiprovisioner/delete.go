package csiprovisioner

import (
	"context"
	"fmt"
	"slices"

	"github.com/container-storage-interface/spec/lib/go/csi"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cairn-dev/cairn/events/consumer"
	"github.com/cairn-dev/cairn/services/controllers/persistentvolume/binding"
)

// reconcileVolume deletes, for a Released volume this controller's driver
// provisioned with reclaim policy Delete, the driver's volume
// (DeleteVolume), then the PV object, then its finalizer: as
// external-provisioner's deleteVolumeOperation.
func (c *Controller) reconcileVolume(ctx context.Context, req consumer.Request) (consumer.Result, error) {
	pv, ok := c.volumes.Get("", req.Key)
	if !ok || pv.Spec.CSI == nil || !c.pool.Has(pv.Spec.CSI.Driver) || pv.Annotations[binding.AnnDynamicallyProvisioned] != pv.Spec.CSI.Driver {
		return consumer.Result{}, nil
	}
	if pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete {
		// Retained (or changed to Retain): the finalizer has nothing to
		// guard.
		if !slices.Contains(pv.Finalizers, Finalizer) {
			return consumer.Result{}, nil
		}
		return consumer.Result{}, c.dropFinalizer(ctx, pv.Name)
	}
	if pv.Status.Phase != corev1.VolumeReleased {
		return consumer.Result{}, nil
	}
	if err := c.deleteVolume(ctx, pv); err != nil {
		c.event(ctx, pv, corev1.EventTypeWarning, ReasonVolumeFailedDelete, err.Error())
		return consumer.Result{}, err
	}
	if pv.DeletionTimestamp == nil {
		pre := metav1.Preconditions{UID: &pv.UID}
		err := c.client.CoreV1().PersistentVolumes().Delete(ctx, pv.Name, metav1.DeleteOptions{Preconditions: &pre})
		if err != nil && !apierrors.IsNotFound(err) {
			return consumer.Result{}, fmt.Errorf("csiprovisioner: delete volume object %s: %w", pv.Name, err)
		}
	}
	return consumer.Result{}, c.dropFinalizer(ctx, pv.Name)
}

func (c *Controller) deleteVolume(ctx context.Context, pv *corev1.PersistentVolume) error {
	conn, err := c.pool.Get(pv.Spec.CSI.Driver)
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	if _, err := conn.Controller.DeleteVolume(cctx, &csi.DeleteVolumeRequest{VolumeId: pv.Spec.CSI.VolumeHandle}); err != nil {
		return fmt.Errorf("rpc error: DeleteVolume %s: %w", pv.Spec.CSI.VolumeHandle, err)
	}
	return nil
}

// dropFinalizer removes Finalizer from the live PV (the cache may not show
// the delete just made).
func (c *Controller) dropFinalizer(ctx context.Context, name string) error {
	pv, err := c.client.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("csiprovisioner: get volume %s: %w", name, err)
	}
	i := slices.Index(pv.Finalizers, Finalizer)
	if i < 0 {
		return nil
	}
	pv.Finalizers = slices.Delete(pv.Finalizers, i, i+1)
	if _, err := c.client.CoreV1().PersistentVolumes().Update(ctx, pv, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
		if apierrors.IsConflict(err) {
			return consumer.ExpectedError(fmt.Errorf("csiprovisioner: remove finalizer of %s: %w", name, err))
		}
		return fmt.Errorf("csiprovisioner: remove finalizer of %s: %w", name, err)
	}
	return nil
}
