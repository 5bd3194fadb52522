package rbac

import (
	"context"
	"fmt"
	"reflect"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

// Reconcile makes the cluster's policy contain the bootstrap policy, as
// kube-apiserver does at start-up (and `kubectl auth reconcile` for a
// file): a missing ClusterRole or ClusterRoleBinding is created; an
// existing one whose AutoUpdateAnnotation is not "false" gets the labels,
// annotations, rules, aggregation selectors and subjects it lacks, and
// nothing it has is removed; a binding whose roleRef differs is recreated.
// Conflicts with concurrent writers (another apiserver reconciling) are
// retried. cs must be allowed to escalate (system:masters).
func Reconcile(ctx context.Context, cs kubernetes.Interface) error {
	roles := cs.RbacV1().ClusterRoles()
	for _, want := range BootstrapClusterRoles() {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			have, err := roles.Get(ctx, want.Name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				_, err = roles.Create(ctx, want, metav1.CreateOptions{})
				if apierrors.IsAlreadyExists(err) {
					return apierrors.NewConflict(rbacv1.Resource("clusterroles"), want.Name, err)
				}
				return err
			}
			if err != nil || have.Annotations[AutoUpdateAnnotation] == "false" {
				return err
			}
			if !reconcileRole(have, want) {
				return nil
			}
			_, err = roles.Update(ctx, have, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			return fmt.Errorf("rbac: reconcile clusterrole %s: %w", want.Name, err)
		}
	}
	bindings := cs.RbacV1().ClusterRoleBindings()
	for _, want := range BootstrapClusterRoleBindings() {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			have, err := bindings.Get(ctx, want.Name, metav1.GetOptions{})
			if err == nil && have.RoleRef != want.RoleRef && have.Annotations[AutoUpdateAnnotation] != "false" {
				// roleRef is immutable: recreate, keeping the subjects.
				if err := bindings.Delete(ctx, have.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &have.UID}}); err != nil && !apierrors.IsNotFound(err) {
					return err
				}
				want.Subjects = mergeSubjects(have.Subjects, want.Subjects)
				err = apierrors.NewNotFound(rbacv1.Resource("clusterrolebindings"), want.Name)
			}
			if apierrors.IsNotFound(err) {
				_, err = bindings.Create(ctx, want, metav1.CreateOptions{})
				if apierrors.IsAlreadyExists(err) {
					return apierrors.NewConflict(rbacv1.Resource("clusterrolebindings"), want.Name, err)
				}
				return err
			}
			if err != nil || have.Annotations[AutoUpdateAnnotation] == "false" {
				return err
			}
			changed := mergeMeta(&have.ObjectMeta, &want.ObjectMeta)
			if subjects := mergeSubjects(have.Subjects, want.Subjects); len(subjects) != len(have.Subjects) {
				have.Subjects, changed = subjects, true
			}
			if !changed {
				return nil
			}
			_, err = bindings.Update(ctx, have, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			return fmt.Errorf("rbac: reconcile clusterrolebinding %s: %w", want.Name, err)
		}
	}
	return nil
}

// reconcileRole adds to have what want has and have lacks (kube's
// computeReconciledRole without removal); it reports whether have changed.
// An aggregated role's rules are the aggregation controller's business.
func reconcileRole(have, want *rbacv1.ClusterRole) bool {
	changed := mergeMeta(&have.ObjectMeta, &want.ObjectMeta)
	if want.AggregationRule != nil {
		if have.AggregationRule == nil {
			have.AggregationRule = &rbacv1.AggregationRule{}
		}
		for _, sel := range want.AggregationRule.ClusterRoleSelectors {
			found := false
			for _, h := range have.AggregationRule.ClusterRoleSelectors {
				if reflect.DeepEqual(h, sel) {
					found = true
					break
				}
			}
			if !found {
				have.AggregationRule.ClusterRoleSelectors = append(have.AggregationRule.ClusterRoleSelectors, sel)
				changed = true
			}
		}
		return changed
	}
	if ok, missing := Covers(have.Rules, want.Rules); !ok {
		have.Rules = append(have.Rules, missing...)
		changed = true
	}
	return changed
}

// mergeMeta adds want's labels and annotations have lacks.
func mergeMeta(have, want *metav1.ObjectMeta) bool {
	changed := false
	for _, kv := range []struct{ have, want *map[string]string }{{&have.Labels, &want.Labels}, {&have.Annotations, &want.Annotations}} {
		for k, v := range *kv.want {
			if _, ok := (*kv.have)[k]; ok {
				continue
			}
			if *kv.have == nil {
				*kv.have = map[string]string{}
			}
			(*kv.have)[k] = v
			changed = true
		}
	}
	return changed
}

// mergeSubjects is have plus the subjects of want it lacks.
func mergeSubjects(have, want []rbacv1.Subject) []rbacv1.Subject {
	out := append([]rbacv1.Subject(nil), have...)
	seen := map[rbacv1.Subject]bool{}
	for _, s := range have {
		seen[s] = true
	}
	for _, s := range want {
		if !seen[s] {
			out = append(out, s)
		}
	}
	return out
}
