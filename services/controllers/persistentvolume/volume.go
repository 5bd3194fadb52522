package persistentvolume

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cairn-dev/cairn/events/consumer"
	"github.com/cairn-dev/cairn/services/controllers/persistentvolume/binding"
)

// syncVolume is kube's syncVolume: a volume without claimRef is
// Available; one whose claim is gone (or was re-created with another UID)
// is Released and reclaimed; one bound to a claim that is bound to it is
// Bound; the half-made bindings are handed to the claim's sync.
func (c *Controller) syncVolume(ctx context.Context, pv *corev1.PersistentVolume) error {
	ref := pv.Spec.ClaimRef
	if ref == nil {
		return c.setVolumePhase(ctx, pv, corev1.VolumeAvailable, "", "", "")
	}
	if ref.UID == "" {
		// Pre-bound by the user to a claim by name: waiting for it.
		return c.setVolumePhase(ctx, pv, corev1.VolumeAvailable, "", "", "")
	}
	pvc, err := c.claimOf(ctx, ref.Namespace, ref.Name)
	if err != nil {
		return err
	}
	if pvc != nil && pvc.UID != ref.UID {
		pvc = nil
	}
	switch {
	case pvc == nil:
		if pv.Status.Phase != corev1.VolumeReleased && pv.Status.Phase != corev1.VolumeFailed {
			if err := c.setVolumePhase(ctx, pv, corev1.VolumeReleased, "", "", ""); err != nil {
				return err
			}
			pv, _ = c.volume(pv.Name)
		}
		return c.reclaimVolume(ctx, pv)
	case pvc.Spec.VolumeName == "":
		// Bound by us with the claim not written yet, or pre-bound by the
		// user: the claim's sync finishes either.
		c.claimQ.Queue().Add(consumer.KeyOf(pvc), consumer.CauseFrom(ctx))
		return nil
	case pvc.Spec.VolumeName == pv.Name:
		return c.setVolumePhase(ctx, pv, corev1.VolumeBound, "", "", "")
	case metav1.HasAnnotation(pv.ObjectMeta, binding.AnnDynamicallyProvisioned) &&
		pv.Spec.PersistentVolumeReclaimPolicy == corev1.PersistentVolumeReclaimDelete:
		// Provisioned for a claim that was bound elsewhere meanwhile: not
		// needed.
		if pv.Status.Phase != corev1.VolumeReleased && pv.Status.Phase != corev1.VolumeFailed {
			if err := c.setVolumePhase(ctx, pv, corev1.VolumeReleased, "", "", ""); err != nil {
				return err
			}
			pv, _ = c.volume(pv.Name)
		}
		return c.reclaimVolume(ctx, pv)
	case metav1.HasAnnotation(pv.ObjectMeta, binding.AnnBoundByController):
		return c.unbindVolume(ctx, pv)
	default:
		// Pre-bound by the user to a claim bound elsewhere: it stays
		// waiting for that claim.
		return nil
	}
}

// claimOf is the claim from the cache, or, when the cache has none, from
// the apiserver (a cache lagging a new claim must not release its volume,
// kube's syncVolume checks the same way); nil when there is none.
func (c *Controller) claimOf(ctx context.Context, ns, name string) (*corev1.PersistentVolumeClaim, error) {
	if pvc, ok := c.claim(ns, name); ok {
		return pvc, nil
	}
	pvc, err := c.client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("persistentvolume: get claim %s/%s: %w", ns, name, err)
	}
	return pvc, nil
}

// reclaimVolume applies a Released volume's reclaim policy: Retain keeps
// it Released; Delete of a dynamically provisioned volume is its
// provisioner's (external-provisioner deletes Released volumes of its
// own); anything else has no plugin here and fails, with kube's Events.
func (c *Controller) reclaimVolume(ctx context.Context, pv *corev1.PersistentVolume) error {
	if pv.Status.Phase != corev1.VolumeReleased {
		return nil
	}
	switch pv.Spec.PersistentVolumeReclaimPolicy {
	case corev1.PersistentVolumeReclaimRecycle:
		return c.setVolumePhase(ctx, pv, corev1.VolumeFailed, "No recycler plugin found for the volume!",
			corev1.EventTypeWarning, ReasonVolumeFailedRecycle)
	case corev1.PersistentVolumeReclaimDelete:
		by := pv.Annotations[binding.AnnDynamicallyProvisioned]
		if by != "" && !strings.HasPrefix(by, "kubernetes.io/") {
			return nil
		}
		return c.setVolumePhase(ctx, pv, corev1.VolumeFailed,
			fmt.Sprintf("error getting deleter volume plugin for volume %q: no deletable volume plugin matched", pv.Name),
			corev1.EventTypeWarning, ReasonVolumeFailedDelete)
	}
	return nil
}

// bind is kube's bind: the volume's claimRef, the volume's phase, the
// claim's volumeName and annotations, the claim's phase, in that order,
// each written only if it is not so already.
func (c *Controller) bind(ctx context.Context, pv *corev1.PersistentVolume, pvc *corev1.PersistentVolumeClaim) error {
	pv, err := c.bindVolumeToClaim(ctx, pv, pvc)
	if err != nil {
		return err
	}
	if err := c.setVolumePhase(ctx, pv, corev1.VolumeBound, "", "", ""); err != nil {
		return err
	}
	pvc, err = c.bindClaimToVolume(ctx, pvc, pv)
	if err != nil {
		return err
	}
	return c.setClaimPhase(ctx, pvc, corev1.ClaimBound, pv)
}

func (c *Controller) bindVolumeToClaim(ctx context.Context, pv *corev1.PersistentVolume, pvc *corev1.PersistentVolumeClaim) (*corev1.PersistentVolume, error) {
	byController := !binding.IsVolumeBoundToClaim(pv, pvc)
	n := pv.DeepCopy()
	dirty := false
	if ref := pv.Spec.ClaimRef; ref == nil || ref.Name != pvc.Name || ref.Namespace != pvc.Namespace || ref.UID != pvc.UID {
		n.Spec.ClaimRef = &corev1.ObjectReference{Kind: claimKind.Kind, APIVersion: "v1", Namespace: pvc.Namespace, Name: pvc.Name,
			UID: pvc.UID, ResourceVersion: pvc.ResourceVersion}
		dirty = true
	}
	if byController && !metav1.HasAnnotation(n.ObjectMeta, binding.AnnBoundByController) {
		metav1.SetMetaDataAnnotation(&n.ObjectMeta, binding.AnnBoundByController, "yes")
		dirty = true
	}
	if !dirty {
		return pv, nil
	}
	return c.updateVolume(ctx, n)
}

func (c *Controller) bindClaimToVolume(ctx context.Context, pvc *corev1.PersistentVolumeClaim, pv *corev1.PersistentVolume) (*corev1.PersistentVolumeClaim, error) {
	n := pvc.DeepCopy()
	dirty := false
	if pvc.Spec.VolumeName != pv.Name {
		n.Spec.VolumeName = pv.Name
		metav1.SetMetaDataAnnotation(&n.ObjectMeta, binding.AnnBoundByController, "yes")
		dirty = true
	}
	if !metav1.HasAnnotation(n.ObjectMeta, binding.AnnBindCompleted) {
		metav1.SetMetaDataAnnotation(&n.ObjectMeta, binding.AnnBindCompleted, "yes")
		dirty = true
	}
	if !dirty {
		return pvc, nil
	}
	return c.updateClaim(ctx, n)
}

// unbindVolume undoes the controller's binding of a volume (claimRef and
// annotation go), or, for a volume the user pre-bound, forgets only the
// claim's UID; the volume is Available again.
func (c *Controller) unbindVolume(ctx context.Context, pv *corev1.PersistentVolume) error {
	n := pv.DeepCopy()
	if metav1.HasAnnotation(pv.ObjectMeta, binding.AnnBoundByController) {
		n.Spec.ClaimRef = nil
		delete(n.Annotations, binding.AnnBoundByController)
	} else {
		n.Spec.ClaimRef.UID = ""
	}
	out, err := c.updateVolume(ctx, n)
	if err != nil {
		return err
	}
	return c.setVolumePhase(ctx, out, corev1.VolumeAvailable, "", "", "")
}

func (c *Controller) updateVolume(ctx context.Context, pv *corev1.PersistentVolume) (*corev1.PersistentVolume, error) {
	out, err := c.client.CoreV1().PersistentVolumes().Update(ctx, pv, metav1.UpdateOptions{})
	if err != nil {
		return nil, writeErr("update volume "+pv.Name, err)
	}
	c.writtenVolumes.store(out)
	return out, nil
}

// setVolumePhase is kube's updateVolumePhaseWithEvent: phase and message
// (lastPhaseTransitionTime when the phase changes), and an Event of
// reason (if any) when it changed; nothing when the phase is so already.
func (c *Controller) setVolumePhase(ctx context.Context, pv *corev1.PersistentVolume, phase corev1.PersistentVolumePhase,
	msg, typ, reason string) error {
	if pv.Status.Phase == phase && pv.Status.Message == msg {
		return nil
	}
	n := pv.DeepCopy()
	if n.Status.Phase != phase {
		now := metav1.NewTime(c.now())
		n.Status.LastPhaseTransitionTime = &now
	}
	n.Status.Phase, n.Status.Message = phase, msg
	out, err := c.client.CoreV1().PersistentVolumes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
	if err != nil {
		return writeErr("update volume status "+pv.Name, err)
	}
	c.writtenVolumes.store(out)
	if reason != "" && pv.Status.Phase != phase {
		c.event(ctx, out, typ, reason, msg)
	}
	return nil
}
