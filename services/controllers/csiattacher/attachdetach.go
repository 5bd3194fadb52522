package csiattacher

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cairn-dev/cairn/events/consumer"
)

// AttachmentName is the name of the VolumeAttachment of a CSI volume on a
// node, as kube's csi attacher names it.
func AttachmentName(volumeHandle, driver, node string) string {
	return fmt.Sprintf("csi-%x", sha256.Sum256([]byte(volumeHandle+driver+node)))
}

// UniqueVolumeName is kube's unique name of a CSI volume
// (kubernetes.io/csi/<driver>^<volumeHandle>), as the node's
// status.volumesAttached and status.volumesInUse list it.
func UniqueVolumeName(driver, volumeHandle string) corev1.UniqueVolumeName {
	return corev1.UniqueVolumeName("kubernetes.io/csi/" + driver + "^" + volumeHandle)
}

// need is one volume a node's pods need attached.
type need struct {
	pv     *corev1.PersistentVolume
	driver string
}

// reconcileNode is the attach/detach controller's loop for one node: the
// VolumeAttachments its pods need exist, the others go, and the node's
// status.volumesAttached says which are attached.
func (c *Controller) reconcileNode(ctx context.Context, req consumer.Request) (consumer.Result, error) {
	nodeName := req.Key
	node, nodeExists := c.nodes.Get("", nodeName)
	needs := map[string]need{}
	if nodeExists {
		needs = c.desired(nodeName)
	}
	for name, n := range needs {
		if _, ok := c.attachments.Get("", name); ok {
			continue
		}
		va := &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: storagev1.VolumeAttachmentSpec{
			Attacher: n.driver, NodeName: nodeName, Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: &n.pv.Name}}}
		if _, err := c.client.StorageV1().VolumeAttachments().Create(ctx, va, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return consumer.Result{}, fmt.Errorf("csiattacher: attach %s to %s: %w", n.pv.Name, nodeName, err)
		}
	}
	for _, va := range c.attachments.ByIndex(indexNode, nodeName) {
		if _, ok := needs[va.Name]; ok || va.DeletionTimestamp != nil || va.Spec.Source.PersistentVolumeName == nil {
			continue
		}
		if nodeExists && c.inUse(node, va) {
			// The kubelet has not unmounted it yet: kube's controller
			// waits for the node to drop it from volumesInUse.
			continue
		}
		pre := metav1.Preconditions{UID: &va.UID}
		err := c.client.StorageV1().VolumeAttachments().Delete(ctx, va.Name, metav1.DeleteOptions{Preconditions: &pre})
		if err != nil && !apierrors.IsNotFound(err) {
			return consumer.Result{}, fmt.Errorf("csiattacher: detach %s: %w", va.Name, err)
		}
	}
	if !nodeExists {
		return consumer.Result{}, nil
	}
	return consumer.Result{}, c.updateVolumesAttached(ctx, node, needs)
}

// desired are the VolumeAttachments the node's running pods need, by name.
func (c *Controller) desired(nodeName string) map[string]need {
	out := map[string]need{}
	for _, p := range c.pods.ByIndex(indexNode, nodeName) {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		for _, v := range p.Spec.Volumes {
			name := claimName(p, v)
			if name == "" {
				continue
			}
			pvc, ok := c.claims.Get(p.Namespace, name)
			if !ok || pvc.Spec.VolumeName == "" || pvc.Status.Phase != corev1.ClaimBound {
				continue
			}
			pv, ok := c.volumes.Get("", pvc.Spec.VolumeName)
			if !ok || pv.Spec.CSI == nil || pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.UID != pvc.UID {
				continue
			}
			if !c.attachRequired(pv.Spec.CSI.Driver) {
				continue
			}
			out[AttachmentName(pv.Spec.CSI.VolumeHandle, pv.Spec.CSI.Driver, nodeName)] = need{pv: pv, driver: pv.Spec.CSI.Driver}
		}
	}
	return out
}

// attachRequired is the CSIDriver's spec.attachRequired; a driver without
// a CSIDriver object needs attaching, as kube's csi plugin decides.
func (c *Controller) attachRequired(driver string) bool {
	d, ok := c.drivers.Get("", driver)
	if !ok || d.Spec.AttachRequired == nil {
		return true
	}
	return *d.Spec.AttachRequired
}

// inUse: the node reports the attachment's volume mounted.
func (c *Controller) inUse(node *corev1.Node, va *storagev1.VolumeAttachment) bool {
	pv, ok := c.volumes.Get("", *va.Spec.Source.PersistentVolumeName)
	if !ok || pv.Spec.CSI == nil {
		return false
	}
	return slices.Contains(node.Status.VolumesInUse, UniqueVolumeName(pv.Spec.CSI.Driver, pv.Spec.CSI.VolumeHandle))
}

// updateVolumesAttached writes the node's status.volumesAttached: the
// needed volumes whose VolumeAttachment is attached.
func (c *Controller) updateVolumesAttached(ctx context.Context, node *corev1.Node, needs map[string]need) error {
	want := []corev1.AttachedVolume{}
	for name, n := range needs {
		if va, ok := c.attachments.Get("", name); ok && va.Status.Attached {
			want = append(want, corev1.AttachedVolume{Name: UniqueVolumeName(n.driver, n.pv.Spec.CSI.VolumeHandle)})
		}
	}
	sort.Slice(want, func(i, j int) bool { return want[i].Name < want[j].Name })
	have := slices.Clone(node.Status.VolumesAttached)
	sort.Slice(have, func(i, j int) bool { return have[i].Name < have[j].Name })
	if slices.Equal(have, want) || (len(have) == 0 && len(want) == 0) {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"volumesAttached": want}})
	if err != nil {
		return err
	}
	if _, err := c.client.CoreV1().Nodes().PatchStatus(ctx, node.Name, patch); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("csiattacher: node %s volumesAttached: %w", node.Name, err)
	}
	return nil
}
