package persistentvolume

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cairn-dev/cairn/events/consumer"
	"github.com/cairn-dev/cairn/services/controllers/persistentvolume/binding"
)

// Event reasons, as kube's pkg/controller/volume/events.
const (
	ReasonFailedBinding        = "FailedBinding"
	ReasonVolumeMismatch       = "VolumeMismatch"
	ReasonWaitForFirstConsumer = "WaitForFirstConsumer"
	ReasonExternalProvisioning = "ExternalProvisioning"
	ReasonProvisioningFailed   = "ProvisioningFailed"
	ReasonClaimLost            = "ClaimLost"
	ReasonClaimMisbound        = "ClaimMisbound"
	ReasonVolumeFailedDelete   = "VolumeFailedDelete"
	ReasonVolumeFailedRecycle  = "VolumeFailedRecycle"
)

// Messages kube writes with them.
const (
	MsgNoVolumeNoClass     = "no persistent volumes available for this claim and no storage class is set"
	MsgWaitForConsumer     = "waiting for first consumer to be created before binding"
	msgExternalProvisioner = "Waiting for a volume to be created either by the external provisioner '%s' or manually by the system administrator. If volume creation is delayed, please verify that the provisioner is running and correctly registered."
)

// syncClaim is kube's syncClaim: claims whose binding was never completed
// go through syncUnboundClaim, the others through syncBoundClaim.
func (c *Controller) syncClaim(ctx context.Context, pvc *corev1.PersistentVolumeClaim) error {
	if pvc.DeletionTimestamp != nil {
		// Protected claims being deleted keep their binding until the
		// finalizer goes; nothing to bind.
		return nil
	}
	if !metav1.HasAnnotation(pvc.ObjectMeta, binding.AnnBindCompleted) {
		return c.syncUnboundClaim(ctx, pvc)
	}
	return c.syncBoundClaim(ctx, pvc)
}

// shouldDelayBinding: the claim's class binds on first consumer and the
// scheduler has not chosen a node yet.
func (c *Controller) shouldDelayBinding(pvc *corev1.PersistentVolumeClaim) bool {
	if _, ok := pvc.Annotations[binding.AnnSelectedNode]; ok {
		return false
	}
	sc, _ := c.class(binding.ClaimClass(pvc))
	return binding.IsDelayBinding(sc)
}

func (c *Controller) syncUnboundClaim(ctx context.Context, pvc *corev1.PersistentVolumeClaim) error {
	if pvc.Spec.VolumeName == "" {
		delay := c.shouldDelayBinding(pvc)
		pv, err := binding.FindBestMatch(pvc, c.volumes.List(nil), delay)
		if err != nil {
			return consumer.TerminalError(err)
		}
		if pv != nil {
			pv, _ = c.volume(pv.Name)
			return c.bind(ctx, pv, pvc)
		}
		switch class := binding.ClaimClass(pvc); {
		case delay:
			c.event(ctx, pvc, corev1.EventTypeNormal, ReasonWaitForFirstConsumer, MsgWaitForConsumer)
		case class != "":
			if err := c.provisionClaim(ctx, pvc, class); err != nil {
				return err
			}
		default:
			c.event(ctx, pvc, corev1.EventTypeNormal, ReasonFailedBinding, MsgNoVolumeNoClass)
		}
		return c.setClaimPhase(ctx, pvc, corev1.ClaimPending, nil)
	}
	// Pre-bound by the user to spec.volumeName.
	pv, ok := c.volume(pvc.Spec.VolumeName)
	if !ok {
		return c.setClaimPhase(ctx, pvc, corev1.ClaimPending, nil)
	}
	switch {
	case pv.Spec.ClaimRef == nil:
		if err := checkVolumeSatisfyClaim(pv, pvc); err != nil {
			c.event(ctx, pvc, corev1.EventTypeWarning, ReasonVolumeMismatch, "Cannot bind to requested volume \""+pv.Name+"\": "+err.Error())
			return c.setClaimPhase(ctx, pvc, corev1.ClaimPending, nil)
		}
		return c.bind(ctx, pv, pvc)
	case binding.IsVolumeBoundToClaim(pv, pvc):
		return c.bind(ctx, pv, pvc)
	case !metav1.HasAnnotation(pvc.ObjectMeta, binding.AnnBoundByController):
		// The user asked for a volume another claim holds: wait until it
		// is released.
		return c.setClaimPhase(ctx, pvc, corev1.ClaimPending, nil)
	default:
		return consumer.TerminalError(fmt.Errorf("persistentvolume: invalid binding of claim %s/%s to volume %s: volume already claimed by %s/%s",
			pvc.Namespace, pvc.Name, pv.Name, pv.Spec.ClaimRef.Namespace, pv.Spec.ClaimRef.Name))
	}
}

func (c *Controller) syncBoundClaim(ctx context.Context, pvc *corev1.PersistentVolumeClaim) error {
	if pvc.Spec.VolumeName == "" {
		if pvc.Status.Phase != corev1.ClaimLost {
			c.event(ctx, pvc, corev1.EventTypeWarning, ReasonClaimLost, "Bound claim has lost reference to PersistentVolume. Data on the volume is lost!")
		}
		return c.setClaimPhase(ctx, pvc, corev1.ClaimLost, nil)
	}
	pv, ok := c.volume(pvc.Spec.VolumeName)
	if !ok {
		if pvc.Status.Phase != corev1.ClaimLost {
			c.event(ctx, pvc, corev1.EventTypeWarning, ReasonClaimLost, "Bound claim has lost its PersistentVolume. Data on the volume is lost!")
		}
		return c.setClaimPhase(ctx, pvc, corev1.ClaimLost, nil)
	}
	switch {
	case pv.Spec.ClaimRef == nil, pv.Spec.ClaimRef.UID == pvc.UID:
		// Unbound volume (fix it) or the binding as it should be (make
		// sure every part of it is written).
		return c.bind(ctx, pv, pvc)
	default:
		if pvc.Status.Phase != corev1.ClaimLost {
			c.event(ctx, pvc, corev1.EventTypeWarning, ReasonClaimMisbound, "Two claims are bound to the same volume, this one is bound incorrectly")
		}
		return c.setClaimPhase(ctx, pvc, corev1.ClaimLost, nil)
	}
}

// checkVolumeSatisfyClaim is kube's: why a volume the claim names cannot
// be bound to it.
func checkVolumeSatisfyClaim(pv *corev1.PersistentVolume, pvc *corev1.PersistentVolumeClaim) error {
	req := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	have := pv.Spec.Capacity[corev1.ResourceStorage]
	switch {
	case req.Cmp(have) > 0:
		return errors.New("requested PV is too small")
	case binding.VolumeClass(pv) != binding.ClaimClass(pvc):
		return errors.New("storageClassName does not match")
	case binding.VolumeModeMismatch(&pvc.Spec, &pv.Spec):
		return errors.New("incompatible volumeMode")
	case !binding.HasAccessModes(pvc, pv):
		return errors.New("incompatible accessMode")
	}
	return nil
}

// provisionClaim is kube's provisionClaim for external provisioners (the
// only kind cairn has): it names the provisioner on the claim (both
// annotations) and says so in an Event; the provisioner does the rest.
func (c *Controller) provisionClaim(ctx context.Context, pvc *corev1.PersistentVolumeClaim, className string) error {
	sc, ok := c.class(className)
	if !ok {
		c.event(ctx, pvc, corev1.EventTypeWarning, ReasonProvisioningFailed, fmt.Sprintf("storageclass.storage.k8s.io %q not found", className))
		return nil
	}
	if strings.HasPrefix(sc.Provisioner, "kubernetes.io/") {
		// An in-tree plugin name: kube has none of those left that
		// provision by itself, cairn has none at all.
		c.event(ctx, pvc, corev1.EventTypeWarning, ReasonProvisioningFailed, "no volume plugin matched name: "+sc.Provisioner)
		return nil
	}
	if pvc.Annotations[binding.AnnStorageProvisioner] != sc.Provisioner || pvc.Annotations[binding.AnnBetaStorageProvisioner] != sc.Provisioner {
		n := pvc.DeepCopy()
		metav1.SetMetaDataAnnotation(&n.ObjectMeta, binding.AnnStorageProvisioner, sc.Provisioner)
		metav1.SetMetaDataAnnotation(&n.ObjectMeta, binding.AnnBetaStorageProvisioner, sc.Provisioner)
		if _, err := c.updateClaim(ctx, n); err != nil {
			return err
		}
	}
	c.event(ctx, pvc, corev1.EventTypeNormal, ReasonExternalProvisioning, fmt.Sprintf(msgExternalProvisioner, sc.Provisioner))
	return nil
}

func (c *Controller) updateClaim(ctx context.Context, pvc *corev1.PersistentVolumeClaim) (*corev1.PersistentVolumeClaim, error) {
	out, err := c.client.CoreV1().PersistentVolumeClaims(pvc.Namespace).Update(ctx, pvc, metav1.UpdateOptions{})
	if err != nil {
		return nil, writeErr("update claim "+pvc.Namespace+"/"+pvc.Name, err)
	}
	c.writtenClaims.store(out)
	return out, nil
}

// setClaimPhase is kube's updateClaimStatus: phase, and with a volume its
// access modes and capacity; nothing is written when nothing changes.
func (c *Controller) setClaimPhase(ctx context.Context, pvc *corev1.PersistentVolumeClaim, phase corev1.PersistentVolumeClaimPhase,
	pv *corev1.PersistentVolume) error {
	n := pvc.DeepCopy()
	n.Status.Phase = phase
	if pv != nil {
		n.Status.AccessModes = pv.Spec.AccessModes
		if _, ok := n.Status.Capacity[corev1.ResourceStorage]; !ok || phase == corev1.ClaimBound && pvc.Status.Phase != corev1.ClaimBound {
			n.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: pv.Spec.Capacity[corev1.ResourceStorage]}
		}
	}
	if equalClaimStatus(&pvc.Status, &n.Status) {
		return nil
	}
	out, err := c.client.CoreV1().PersistentVolumeClaims(n.Namespace).UpdateStatus(ctx, n, metav1.UpdateOptions{})
	if err != nil {
		return writeErr("update claim status "+n.Namespace+"/"+n.Name, err)
	}
	c.writtenClaims.store(out)
	return nil
}

func equalClaimStatus(a, b *corev1.PersistentVolumeClaimStatus) bool {
	if a.Phase != b.Phase || len(a.AccessModes) != len(b.AccessModes) {
		return false
	}
	for i := range a.AccessModes {
		if a.AccessModes[i] != b.AccessModes[i] {
			return false
		}
	}
	qa, qb := a.Capacity[corev1.ResourceStorage], b.Capacity[corev1.ResourceStorage]
	return qa.Cmp(qb) == 0
}

// writeErr wraps a failed write: a conflict or a missing object is the
// cache lagging (retried quietly), anything else an error.
func writeErr(op string, err error) error {
	err = fmt.Errorf("persistentvolume: %s: %w", op, err)
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return consumer.ExpectedError(err)
	}
	return err
}
