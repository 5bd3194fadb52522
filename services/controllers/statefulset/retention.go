package statefulset

import (
	"context"
	"errors"
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// This file is persistentVolumeClaimRetentionPolicy, as kube's
// stateful_pod_control.go and stateful_set_utils.go do it: the policy is
// kept as owner references (not controller ones) on the claims, and the
// garbage collector deletes a claim once its owners are gone. whenDeleted
// Delete makes the set an owner of its pods' claims; whenScaled Delete
// makes the pod of a condemned ordinal (outside the set's range) an owner
// of its claims, so they go with it.

// retentionPolicy is the set's policy, Retain for what is unset.
func retentionPolicy(set *appsv1.StatefulSet) appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy {
	p := appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
		WhenDeleted: appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
		WhenScaled:  appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
	}
	if s := set.Spec.PersistentVolumeClaimRetentionPolicy; s != nil {
		if s.WhenDeleted != "" {
			p.WhenDeleted = s.WhenDeleted
		}
		if s.WhenScaled != "" {
			p.WhenScaled = s.WhenScaled
		}
	}
	return p
}

// updateClaimOwnerRefs sets claim's owner references for set and pod as
// the policy wants them (kube's updateClaimOwnerRefForSetAndPod) and
// reports whether it changed them. A pod not created yet (no UID) is not
// referenced.
func updateClaimOwnerRefs(claim *corev1.PersistentVolumeClaim, set *appsv1.StatefulSet, pod *corev1.Pod) bool {
	const del = appsv1.DeletePersistentVolumeClaimRetentionPolicyType
	p := retentionPolicy(set)
	setRef := metav1.OwnerReference{APIVersion: controllerKind.GroupVersion().String(), Kind: controllerKind.Kind, Name: set.Name, UID: set.UID}
	podRef := metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID}
	scaledDown := !inOrdinalRange(pod, set)
	wantSet := p.WhenDeleted == del && !(p.WhenScaled == del && scaledDown)
	wantPod := p.WhenScaled == del && scaledDown && pod.UID != ""
	changed := setOwnerRef(claim, setRef, wantSet)
	return setOwnerRef(claim, podRef, wantPod) || changed
}

// setOwnerRef adds (want) or removes the reference to ref's owner, by
// UID; it reports a change.
func setOwnerRef(claim *corev1.PersistentVolumeClaim, ref metav1.OwnerReference, want bool) bool {
	has := slices.ContainsFunc(claim.OwnerReferences, func(r metav1.OwnerReference) bool { return r.UID == ref.UID })
	switch {
	case want && !has && ref.UID != "":
		claim.OwnerReferences = append(claim.OwnerReferences, ref)
		return true
	case !want && has:
		claim.OwnerReferences = slices.DeleteFunc(slices.Clone(claim.OwnerReferences), func(r metav1.OwnerReference) bool { return r.UID == ref.UID })
		return true
	}
	return false
}

// fixClaims updates the owner references of pod's existing claims that do
// not match the policy (kube's ClaimsMatchRetentionPolicy, then
// UpdatePodClaimForRetentionPolicy). A claim not there yet is left to its
// create.
func (c *Controller) fixClaims(ctx context.Context, set *appsv1.StatefulSet, pod *corev1.Pod) error {
	var errs []error
	for _, want := range claimsFor(set, pod) {
		cached, ok := c.pvcs.Get(set.Namespace, want.Name)
		if !ok {
			continue
		}
		claim := cached.DeepCopy()
		if !updateClaimOwnerRefs(claim, set, pod) {
			continue
		}
		_, err := c.client.CoreV1().PersistentVolumeClaims(set.Namespace).Update(ctx, claim, metav1.UpdateOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("statefulset: update owner references of claim %s: %w", claim.Name, err))
		}
	}
	return errors.Join(errs...)
}
