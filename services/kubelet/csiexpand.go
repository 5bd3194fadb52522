package kubelet

import (
	"context"
	"fmt"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientretry "k8s.io/client-go/util/retry"

	"github.com/cairn-dev/cairn/services/csi/mount"
)

// Event reasons of node expansion, as the kubelet's.
const (
	ReasonFileSystemResizeSuccessful = "FileSystemResizeSuccessful"
	ReasonVolumeResizeFailed         = "VolumeResizeFailed"
)

// resizeConditions are the claim conditions of an expansion, which a
// finished one removes (kube's knownResizeConditions).
var resizeConditions = map[corev1.PersistentVolumeClaimConditionType]bool{
	corev1.PersistentVolumeClaimResizing:                true,
	corev1.PersistentVolumeClaimFileSystemResizePending: true,
	corev1.PersistentVolumeClaimControllerResizeError:   true,
	corev1.PersistentVolumeClaimNodeResizeError:         true,
}

// expandCSIVolumes is the kubelet's in-use expansion (kube's volume
// manager, ExpandInUseVolume): every claim published for the running pod
// is looked at, as kube's populator reprocesses a pod on each sync, and
// finished when the external-resizer left it to the node.
func (k *Kubelet) expandCSIVolumes(ctx context.Context, pod *corev1.Pod) {
	for _, vol := range k.csiVolumesOf(pod.UID) {
		v := podVolume(pod, vol.PodVolume)
		if v == nil || claimName(pod, v) == "" {
			continue
		}
		if ok, err := mount.IsMountPoint(vol.target()); err != nil || !ok {
			continue // not set up (yet): the mount expands it
		}
		pvc, err := k.client.CoreV1().PersistentVolumeClaims(pod.Namespace).Get(ctx, claimName(pod, v), metav1.GetOptions{})
		if err != nil {
			k.logErr(ctx, "expand volume: get claim", err)
			continue
		}
		if !nodeResizePending(pvc) {
			continue
		}
		pv, err := k.client.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
		if err != nil {
			k.logErr(ctx, "expand volume: get volume", err)
			continue
		}
		k.logErr(ctx, "expand volume "+pv.Name, k.expandCSIVolume(ctx, pod, vol, pvc, pv))
	}
}

func podVolume(pod *corev1.Pod, name string) *corev1.Volume {
	for i := range pod.Spec.Volumes {
		if pod.Spec.Volumes[i].Name == name {
			return &pod.Spec.Volumes[i]
		}
	}
	return nil
}

// nodeResizePending: the resizer has expanded the volume and left the
// rest to the node (kube's runPreCheck: NodeResizePending, or
// NodeResizeInProgress of an attempt that did not finish).
func nodeResizePending(pvc *corev1.PersistentVolumeClaim) bool {
	switch pvc.Status.AllocatedResourceStatuses[corev1.ResourceStorage] {
	case corev1.PersistentVolumeClaimNodeResizePending, corev1.PersistentVolumeClaimNodeResizeInProgress:
		return true
	}
	return false
}

// expandCSIVolume is kube's NodeExpander for a published volume of pod:
// when the PV has grown past the claim's status.capacity and the claim
// waits for the node, the claim is marked NodeResizeInProgress, the
// driver's NodeExpandVolume (when it offers EXPAND_VOLUME) grows the
// volume at its target to the PV's size, then the claim's
// status.capacity becomes that size, its storage resize status and its
// resize conditions go (Normal FileSystemResizeSuccessful on the pod and
// the claim). A final failure is the claim's NodeResizeError condition,
// and for InvalidArgument or OutOfRange storage=NodeResizeInfeasible,
// which stops the retries; Warning VolumeResizeFailed on the pod.
func (k *Kubelet) expandCSIVolume(ctx context.Context, pod *corev1.Pod, vol *csiVolume, pvc *corev1.PersistentVolumeClaim, pv *corev1.PersistentVolume) error {
	if pv.Spec.CSI == nil || pv.Spec.CSI.VolumeHandle != vol.VolumeHandle || !nodeResizePending(pvc) {
		return nil
	}
	want := pv.Spec.Capacity[corev1.ResourceStorage]
	if have := pvc.Status.Capacity[corev1.ResourceStorage]; want.Cmp(have) <= 0 {
		return nil // resizing is not needed
	}
	d, ok := k.csi.driver(vol.Driver)
	if !ok {
		return fmt.Errorf("kubernetes.io/csi: driver name %s not found in the list of registered CSI drivers", vol.Driver)
	}
	if !d.info.Node[csi.NodeServiceCapability_RPC_EXPAND_VOLUME] {
		// Nothing to call: the claim keeps waiting, the mount goes on.
		k.podEventf(ctx, pod, corev1.EventTypeWarning, ReasonVolumeResizeFailed,
			"Expander.NodeExpand found CSI plugin kubernetes.io/csi/%s to not support node expansion", vol.Driver)
		return nil
	}
	pvc = pvc.DeepCopy()
	pvc.Status.AllocatedResourceStatuses[corev1.ResourceStorage] = corev1.PersistentVolumeClaimNodeResizeInProgress
	pvc, err := k.client.CoreV1().PersistentVolumeClaims(pvc.Namespace).UpdateStatus(ctx, pvc, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("MountVolume.NodeExpandVolume failed to mark node expansion in progress: %w", err)
	}
	k.csiMu.Lock()
	_, err = d.client.Node.NodeExpandVolume(ctx, &csi.NodeExpandVolumeRequest{VolumeId: vol.VolumeHandle, VolumePath: vol.target(),
		StagingTargetPath: vol.StagingPath, CapacityRange: &csi.CapacityRange{RequiredBytes: want.Value()},
		VolumeCapability: volumeCapability(pv, d.info.Node)})
	k.csiMu.Unlock()
	if err != nil {
		err = fmt.Errorf("Expander.NodeExpand failed to expand the volume : %w", err)
		k.podEventf(ctx, pod, corev1.EventTypeWarning, ReasonVolumeResizeFailed, "%v", err)
		if finalError(err) {
			k.logErr(ctx, "mark node expansion failed", k.markNodeExpansionFailed(ctx, pvc, err, infeasible(err)))
		}
		return err
	}
	msg := fmt.Sprintf("MountVolume.NodeExpandVolume succeeded for volume %q %s", pv.Name, k.cfg.NodeName)
	k.podEventf(ctx, pod, corev1.EventTypeNormal, ReasonFileSystemResizeSuccessful, "%s", msg)
	k.eventf(ctx, claimRef(pvc), corev1.EventTypeNormal, ReasonFileSystemResizeSuccessful, "%s", msg)
	return k.markFSResizeFinished(ctx, pvc, want)
}

func claimRef(pvc *corev1.PersistentVolumeClaim) corev1.ObjectReference {
	return corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: pvc.Namespace, Name: pvc.Name,
		UID: pvc.UID, ResourceVersion: pvc.ResourceVersion}
}

// markFSResizeFinished is kube's MarkNodeExpansionFinishedWithRecovery:
// the claim's capacity is the new size, its storage resize status and
// its resize conditions go.
func (k *Kubelet) markFSResizeFinished(ctx context.Context, pvc *corev1.PersistentVolumeClaim, size resource.Quantity) error {
	return k.updateClaimStatus(ctx, pvc, func(c *corev1.PersistentVolumeClaim) {
		if c.Status.Capacity == nil {
			c.Status.Capacity = corev1.ResourceList{}
		}
		c.Status.Capacity[corev1.ResourceStorage] = size
		delete(c.Status.AllocatedResourceStatuses, corev1.ResourceStorage)
		if len(c.Status.AllocatedResourceStatuses) == 0 {
			c.Status.AllocatedResourceStatuses = nil
		}
		kept := c.Status.Conditions[:0]
		for _, cond := range c.Status.Conditions {
			if !resizeConditions[cond.Type] {
				kept = append(kept, cond)
			}
		}
		c.Status.Conditions = kept
	})
}

// markNodeExpansionFailed is kube's MarkNodeExpansionFailedCondition and,
// for an infeasible size, MarkNodeExpansionInfeasible.
func (k *Kubelet) markNodeExpansionFailed(ctx context.Context, pvc *corev1.PersistentVolumeClaim, cause error, infeasible bool) error {
	now := metav1.NewTime(k.now())
	return k.updateClaimStatus(ctx, pvc, func(c *corev1.PersistentVolumeClaim) {
		if infeasible {
			c.Status.AllocatedResourceStatuses[corev1.ResourceStorage] = corev1.PersistentVolumeClaimNodeResizeInfeasible
		}
		cond := corev1.PersistentVolumeClaimCondition{Type: corev1.PersistentVolumeClaimNodeResizeError, Status: corev1.ConditionTrue,
			LastTransitionTime: now, Message: fmt.Sprintf("failed to expand pvc with %v", cause)}
		for i := range c.Status.Conditions {
			if c.Status.Conditions[i].Type == cond.Type {
				c.Status.Conditions[i] = cond
				return
			}
		}
		c.Status.Conditions = append(c.Status.Conditions, cond)
	})
}

// updateClaimStatus applies change to the claim's status and writes it,
// reading the claim again on a conflict.
func (k *Kubelet) updateClaimStatus(ctx context.Context, pvc *corev1.PersistentVolumeClaim, change func(*corev1.PersistentVolumeClaim)) error {
	claims := k.client.CoreV1().PersistentVolumeClaims(pvc.Namespace)
	cur := pvc
	return clientretry.RetryOnConflict(clientretry.DefaultRetry, func() error {
		if cur == nil {
			var err error
			if cur, err = claims.Get(ctx, pvc.Name, metav1.GetOptions{}); err != nil {
				return err
			}
			if cur.UID != pvc.UID {
				return nil // another claim of the same name
			}
		}
		upd := cur.DeepCopy()
		if upd.Status.AllocatedResourceStatuses == nil {
			upd.Status.AllocatedResourceStatuses = map[corev1.ResourceName]corev1.ClaimResourceStatus{}
		}
		change(upd)
		cur = nil
		_, err := claims.UpdateStatus(ctx, upd, metav1.UpdateOptions{})
		return err
	})
}

// finalError: the driver will not do better on a retry of the same call
// (kube's isFinalError: anything but a timeout, cancellation,
// unavailability, exhausted resources or an abort).
func finalError(err error) bool {
	if _, ok := status.FromError(err); !ok {
		return false // not the driver's answer
	}
	switch status.Code(err) {
	case codes.Canceled, codes.DeadlineExceeded, codes.Unavailable, codes.ResourceExhausted, codes.Aborted:
		return false
	}
	return true
}

// infeasible: the size itself is refused.
func infeasible(err error) bool {
	c := status.Code(err)
	return c == codes.InvalidArgument || c == codes.OutOfRange
}
