package statefulset

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
)

// This file is the PersistentVolumeClaim step of kube's pod control
// (createPersistentVolumeClaims), kept apart from the rest: cairn does not
// serve persistentvolumeclaims yet. While discovery does not list them, a
// set with volumeClaimTemplates gets its pods (whose volumes name the
// claims NAME-SET-ORDINAL) and the step is skipped with a logged reason.
// See the TODO in doc.go.

// claimsRecheck is how long the answer of discovery is kept.
const claimsRecheck = 30 * time.Second

// claimsAPI remembers whether the apiserver serves persistentvolumeclaims.
type claimsAPI struct {
	disco discovery.DiscoveryInterface

	mu      sync.Mutex
	served  bool
	checked time.Time
	logged  map[string]bool // sets whose skip was logged
}

// isServed reports whether core/v1 persistentvolumeclaims is served,
// asking discovery at most every claimsRecheck.
func (a *claimsAPI) isServed(now time.Time) (bool, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.checked.IsZero() && now.Sub(a.checked) < claimsRecheck {
		return a.served, nil
	}
	list, err := a.disco.ServerResourcesForGroupVersion("v1")
	if err != nil {
		return false, fmt.Errorf("statefulset: discovery of v1: %w", err)
	}
	a.served, a.checked = false, now
	for _, r := range list.APIResources {
		if r.Name == "persistentvolumeclaims" {
			a.served = true
		}
	}
	return a.served, nil
}

// skipLogged reports whether the skip for key was logged already, and
// marks it.
func (a *claimsAPI) skipLogged(key string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.logged == nil {
		a.logged = map[string]bool{}
	}
	done := a.logged[key]
	a.logged[key] = true
	return done
}

// ensureClaims creates the claims of pod that do not exist (kube's
// createPersistentVolumeClaims). A set without claim templates has
// nothing to do; while the API does not serve claims the step is skipped
// (logged once per set).
func (c *Controller) ensureClaims(ctx context.Context, set *appsv1.StatefulSet, pod *corev1.Pod) error {
	if len(set.Spec.VolumeClaimTemplates) == 0 {
		return nil
	}
	served, err := c.claims.isServed(c.now())
	if err != nil {
		return err
	}
	if !served {
		if key := set.Namespace + "/" + set.Name; !c.claims.skipLogged(key) {
			c.log.Info("volumeClaimTemplates skipped: the apiserver does not serve persistentvolumeclaims",
				"key", key, "templates", len(set.Spec.VolumeClaimTemplates))
		}
		return nil
	}
	api := c.client.CoreV1().PersistentVolumeClaims(set.Namespace)
	var errs []error
	for _, claim := range claimsFor(set, pod) {
		got, err := api.Get(ctx, claim.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
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
