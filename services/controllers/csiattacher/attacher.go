package csiattacher

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/container-storage-interface/spec/lib/go/csi"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cairn-dev/cairn/events/consumer"
	"github.com/cairn-dev/cairn/services/controllers/csiprovisioner"
)

// reconcileAttachment is external-attacher's syncVA for the drivers with
// an endpoint: attach (finalizers, ControllerPublishVolume, status) or,
// for one being deleted, detach.
func (c *Controller) reconcileAttachment(ctx context.Context, req consumer.Request) (consumer.Result, error) {
	va, ok := c.attachments.Get("", req.Key)
	if !ok || !c.pool.Has(va.Spec.Attacher) || va.Spec.Source.PersistentVolumeName == nil {
		return consumer.Result{}, nil
	}
	fin := Finalizer(va.Spec.Attacher)
	if va.DeletionTimestamp != nil {
		if !slices.Contains(va.Finalizers, fin) {
			return consumer.Result{}, nil
		}
		return consumer.Result{}, c.detach(ctx, va, fin)
	}
	if va.Status.Attached {
		return consumer.Result{}, nil
	}
	return consumer.Result{}, c.attach(ctx, va, fin)
}

func (c *Controller) attach(ctx context.Context, va *storagev1.VolumeAttachment, fin string) error {
	pvName := *va.Spec.Source.PersistentVolumeName
	pv, ok := c.volumes.Get("", pvName)
	if !ok || pv.Spec.CSI == nil {
		return c.attachFailed(ctx, va, fmt.Errorf("persistentvolume %q not found", pvName))
	}
	// The PV keeps its finalizer while an attachment refers to it, the
	// attachment until it is detached.
	if err := c.addFinalizer(ctx, pv.Name, fin); err != nil {
		return err
	}
	if !slices.Contains(va.Finalizers, fin) {
		n := va.DeepCopy()
		n.Finalizers = append(n.Finalizers, fin)
		var err error
		if va, err = c.client.StorageV1().VolumeAttachments().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
			return conflictExpected(fmt.Errorf("csiattacher: finalizer of %s: %w", n.Name, err))
		}
	}
	conn, err := c.pool.Get(va.Spec.Attacher)
	if err != nil {
		return c.attachFailed(ctx, va, err)
	}
	cctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	caps, err := conn.Capabilities(cctx)
	if err != nil {
		return c.attachFailed(ctx, va, err)
	}
	var metadata map[string]string
	if caps.PublishUnpublish {
		req, err := c.publishRequest(va, pv, caps.SingleNodeMultiWriter)
		if err != nil {
			return c.attachFailed(ctx, va, err)
		}
		rep, err := conn.Controller.ControllerPublishVolume(cctx, req)
		if err != nil {
			return c.attachFailed(ctx, va, fmt.Errorf("rpc error: ControllerPublishVolume: %w", err))
		}
		metadata = rep.GetPublishContext()
	}
	n := va.DeepCopy()
	n.Status = storagev1.VolumeAttachmentStatus{Attached: true, AttachmentMetadata: metadata}
	if _, err := c.client.StorageV1().VolumeAttachments().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		return conflictExpected(fmt.Errorf("csiattacher: status of %s: %w", n.Name, err))
	}
	return nil
}

// publishRequest is external-attacher's ControllerPublishVolume request.
func (c *Controller) publishRequest(va *storagev1.VolumeAttachment, pv *corev1.PersistentVolume, multiWriter bool) (*csi.ControllerPublishVolumeRequest, error) {
	nodeID, err := c.nodeID(va.Spec.Attacher, va.Spec.NodeName)
	if err != nil {
		return nil, err
	}
	src := pv.Spec.CSI
	vcs, err := csiprovisioner.VolumeCapabilities(pv.Spec.AccessModes, pv.Spec.VolumeMode, src.FSType, pv.Spec.MountOptions, multiWriter)
	if err != nil {
		return nil, err
	}
	if len(vcs) == 0 {
		return nil, fmt.Errorf("persistentvolume %q has no access modes", pv.Name)
	}
	return &csi.ControllerPublishVolumeRequest{VolumeId: src.VolumeHandle, NodeId: nodeID, VolumeCapability: widest(vcs),
		Readonly: src.ReadOnly, VolumeContext: src.VolumeAttributes}, nil
}

// widest is the one capability external-attacher sends for a volume's
// access modes: many writers over one reader over one node.
func widest(vcs []*csi.VolumeCapability) *csi.VolumeCapability {
	rank := map[csi.VolumeCapability_AccessMode_Mode]int{
		csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER: 3,
		csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY:  2,
	}
	best := vcs[0]
	for _, vc := range vcs[1:] {
		if rank[vc.GetAccessMode().GetMode()] > rank[best.GetAccessMode().GetMode()] {
			best = vc
		}
	}
	return best
}

// nodeID is the driver's id of node, from the node's CSINode.
func (c *Controller) nodeID(driver, node string) (string, error) {
	cn, ok := c.csiNodes.Get("", node)
	if !ok {
		return "", fmt.Errorf("csinode.storage.k8s.io %q not found", node)
	}
	for _, d := range cn.Spec.Drivers {
		if d.Name == driver {
			return d.NodeID, nil
		}
	}
	return "", fmt.Errorf("CSINode %s does not contain driver %s", node, driver)
}

// attachFailed records status.attachError and returns err for a retry.
func (c *Controller) attachFailed(ctx context.Context, va *storagev1.VolumeAttachment, err error) error {
	n := va.DeepCopy()
	n.Status.AttachError = &storagev1.VolumeError{Time: metav1.NewTime(c.now()), Message: err.Error()}
	if _, uerr := c.client.StorageV1().VolumeAttachments().UpdateStatus(ctx, n, metav1.UpdateOptions{}); uerr != nil && !apierrors.IsNotFound(uerr) {
		return errors.Join(err, uerr)
	}
	return fmt.Errorf("csiattacher: attach %s: %w", va.Name, err)
}

// detach is ControllerUnpublishVolume, then status.attached false, then
// the finalizer removed (the apiserver then deletes the attachment).
func (c *Controller) detach(ctx context.Context, va *storagev1.VolumeAttachment, fin string) error {
	if err := c.unpublish(ctx, va); err != nil {
		n := va.DeepCopy()
		n.Status.DetachError = &storagev1.VolumeError{Time: metav1.NewTime(c.now()), Message: err.Error()}
		if _, uerr := c.client.StorageV1().VolumeAttachments().UpdateStatus(ctx, n, metav1.UpdateOptions{}); uerr != nil && !apierrors.IsNotFound(uerr) {
			return errors.Join(err, uerr)
		}
		return fmt.Errorf("csiattacher: detach %s: %w", va.Name, err)
	}
	n := va.DeepCopy()
	if n.Status.Attached || n.Status.AttachmentMetadata != nil || n.Status.DetachError != nil {
		n.Status = storagev1.VolumeAttachmentStatus{}
		var err error
		if n, err = c.client.StorageV1().VolumeAttachments().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
			if apierrors.IsNotFound(err) {
				return nil
			}
			return conflictExpected(fmt.Errorf("csiattacher: status of %s: %w", va.Name, err))
		}
	}
	n.Finalizers = slices.DeleteFunc(n.Finalizers, func(f string) bool { return f == fin })
	if _, err := c.client.StorageV1().VolumeAttachments().Update(ctx, n, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return conflictExpected(fmt.Errorf("csiattacher: finalizer of %s: %w", va.Name, err))
	}
	return nil
}

func (c *Controller) unpublish(ctx context.Context, va *storagev1.VolumeAttachment) error {
	conn, err := c.pool.Get(va.Spec.Attacher)
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	caps, err := conn.Capabilities(cctx)
	if err != nil {
		return err
	}
	if !caps.PublishUnpublish {
		return nil
	}
	pv, ok := c.volumes.Get("", *va.Spec.Source.PersistentVolumeName)
	if !ok || pv.Spec.CSI == nil {
		// Nothing says which volume it was; kube's attacher fails too
		// (the PV's finalizer keeps it while attached).
		return fmt.Errorf("persistentvolume %q not found", *va.Spec.Source.PersistentVolumeName)
	}
	nodeID, err := c.nodeID(va.Spec.Attacher, va.Spec.NodeName)
	if err != nil {
		if !va.Status.Attached {
			// Never attached, and without a node id it never could
			// have been published: nothing to undo.
			return nil
		}
		return err
	}
	if _, err := conn.Controller.ControllerUnpublishVolume(cctx, &csi.ControllerUnpublishVolumeRequest{
		VolumeId: pv.Spec.CSI.VolumeHandle, NodeId: nodeID}); err != nil {
		return fmt.Errorf("rpc error: ControllerUnpublishVolume: %w", err)
	}
	return nil
}

// reconcileVolume removes a PV's attacher finalizer once no attachment
// of the driver refers to it.
func (c *Controller) reconcileVolume(ctx context.Context, req consumer.Request) (consumer.Result, error) {
	pv, ok := c.volumes.Get("", req.Key)
	if !ok || pv.Spec.CSI == nil || !c.pool.Has(pv.Spec.CSI.Driver) {
		return consumer.Result{}, nil
	}
	fin := Finalizer(pv.Spec.CSI.Driver)
	if !slices.Contains(pv.Finalizers, fin) {
		return consumer.Result{}, nil
	}
	for _, va := range c.attachments.List(nil) {
		if src := va.Spec.Source.PersistentVolumeName; src != nil && *src == pv.Name && va.Spec.Attacher == pv.Spec.CSI.Driver {
			return consumer.Result{}, nil
		}
	}
	// Read live: the cache may lag behind an attachment just made.
	live, err := c.client.StorageV1().VolumeAttachments().List(ctx, metav1.ListOptions{})
	if err != nil {
		return consumer.Result{}, fmt.Errorf("csiattacher: list attachments: %w", err)
	}
	for _, va := range live.Items {
		if src := va.Spec.Source.PersistentVolumeName; src != nil && *src == pv.Name && va.Spec.Attacher == pv.Spec.CSI.Driver {
			return consumer.Result{}, nil
		}
	}
	n := pv.DeepCopy()
	n.Finalizers = slices.DeleteFunc(n.Finalizers, func(f string) bool { return f == fin })
	if _, err := c.client.CoreV1().PersistentVolumes().Update(ctx, n, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return consumer.Result{}, conflictExpected(fmt.Errorf("csiattacher: finalizer of %s: %w", pv.Name, err))
	}
	return consumer.Result{}, nil
}

// addFinalizer adds fin to the live PV.
func (c *Controller) addFinalizer(ctx context.Context, name, fin string) error {
	if pv, ok := c.volumes.Get("", name); ok && slices.Contains(pv.Finalizers, fin) {
		return nil
	}
	pv, err := c.client.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("csiattacher: get volume %s: %w", name, err)
	}
	if slices.Contains(pv.Finalizers, fin) {
		return nil
	}
	pv.Finalizers = append(pv.Finalizers, fin)
	if _, err := c.client.CoreV1().PersistentVolumes().Update(ctx, pv, metav1.UpdateOptions{}); err != nil {
		return conflictExpected(fmt.Errorf("csiattacher: finalizer of %s: %w", name, err))
	}
	return nil
}

// conflictExpected marks a conflict (a stale read) as expected: retried
// without noise.
func conflictExpected(err error) error {
	if apierrors.IsConflict(err) {
		return consumer.ExpectedError(err)
	}
	return err
}
