package statefulset

import (
	"context"
	"errors"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// This file is the PersistentVolumeClaim step of kube's pod control
// (createPersistentVolumeClaims, PodClaimIsStale); the retention policy's
// owner references are in retention.go.

// ensureClaims creates the claims of pod that do not exist (kube's
// createPersistentVolumeClaims), with the owner references of the set's
// retention policy. A set without claim templates has nothing to do.
func (c *Controller) ensureClaims(ctx context.Context, set *appsv1.StatefulSet, pod *corev1.Pod) error {
	if len(set.Spec.VolumeClaimTemplates) == 0 {
		return nil
	}
	api := c.client.CoreV1().PersistentVolumeClaims(set.Namespace)
	var errs []error
	for _, claim := range claimsFor(set, pod) {
		got, err := api.Get(ctx, claim.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			updateClaimOwnerRefs(&claim, set, pod)
			_, err := api.Create(ctx, &claim, metav1.CreateOptions{})
			if err != nil {
				errs = append(errs, fmt.Errorf("failed to create PVC %s: %w", claim.Name, err))
			}
			if err == nil || !apierrors.IsAlreadyExists(err) {
				c.claimEvent(ctx, set, pod, &claim, err)
			}
		case err != nil:
			errs = append(errs, fmt.Errorf("failed to retrieve PVC %s: %w", claim.Name, err))
			c.claimEvent(ctx, set, pod, &claim, err)
		case got.DeletionTimestamp != nil:
			errs = append(errs, fmt.Errorf("pvc %s is being deleted", claim.Name))
		}
	}
	return errors.Join(errs...)
}

// claimIsStale is kube's PodClaimIsStale: when scaled-down claims are
// deleted, a pod is not created while one of its claims is still being
// deleted (it would come back with the old data, then lose it).
func (c *Controller) claimIsStale(set *appsv1.StatefulSet, pod *corev1.Pod) bool {
	if retentionPolicy(set).WhenScaled == appsv1.RetainPersistentVolumeClaimRetentionPolicyType {
		return false
	}
	for _, claim := range claimsFor(set, pod) {
		if got, ok := c.pvcs.Get(set.Namespace, claim.Name); ok && got.DeletionTimestamp != nil {
			return true
		}
	}
	return false
}

// claimEvent records a claim create as kube does.
func (c *Controller) claimEvent(ctx context.Context, set *appsv1.StatefulSet, pod *corev1.Pod, claim *corev1.PersistentVolumeClaim, err error) {
	if err == nil {
		c.event(ctx, set, corev1.EventTypeNormal, "SuccessfulCreate",
			fmt.Sprintf("create Claim %s Pod %s in StatefulSet %s success", claim.Name, pod.Name, set.Name))
		return
	}
	c.event(ctx, set, corev1.EventTypeWarning, "FailedCreate",
		fmt.Sprintf("create Claim %s for Pod %s in StatefulSet %s failed error: %s", claim.Name, pod.Name, set.Name, err.Error()))
}
