package rbac

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
)

// Aggregator is kube's ClusterRole aggregation controller: the rules of a
// ClusterRole with an aggregationRule are the rules of every ClusterRole
// its selectors match (in name order, each rule once). It runs in the
// apiserver, on the apiserver's own RBAC caches, and writes through the
// apiserver; every apiserver replica runs one, and since each writes the
// same result with a compare-and-swap, they do not fight.
type Aggregator struct {
	caches  *Caches
	changed <-chan struct{}
	cs      kubernetes.Interface
	log     *slog.Logger
}

// NewAggregator aggregates the ClusterRoles of caches, writing through cs.
func NewAggregator(caches *Caches, cs kubernetes.Interface, log *slog.Logger) *Aggregator {
	return &Aggregator{caches: caches, changed: caches.Changed(), cs: cs, log: log}
}

// Run aggregates after every change of a ClusterRole until ctx ends. A
// failed write is logged and retried on the next change.
func (a *Aggregator) Run(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-a.changed:
		}
		if err := a.Sync(ctx); err != nil && ctx.Err() == nil {
			a.log.Warn("aggregate clusterroles", "err", err)
		}
	}
}

// Sync aggregates every aggregated ClusterRole of the cache once, to a
// fixed point (an aggregated role may select another, as admin selects
// edit), and writes those that changed. A conflict means a newer version
// is on its way through the log, which will sync again.
func (a *Aggregator) Sync(ctx context.Context) error {
	cached := a.caches.ClusterRoleList()
	local := make([]*rbacv1.ClusterRole, len(cached))
	for i, r := range cached {
		local[i] = r.DeepCopy()
	}
	for range 10 {
		changed := false
		for _, r := range local {
			if r.AggregationRule == nil {
				continue
			}
			if rules := Aggregate(r, local); !equalRules(rules, r.Rules) {
				r.Rules, changed = rules, true
			}
		}
		if !changed {
			break
		}
	}
	var errs []error
	for i, r := range local {
		if r.AggregationRule == nil || equalRules(r.Rules, cached[i].Rules) {
			continue
		}
		_, err := a.cs.RbacV1().ClusterRoles().Update(ctx, r, metav1.UpdateOptions{FieldManager: "clusterrole-aggregation-controller"})
		if err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("rbac: aggregate %s: %w", r.Name, err))
		}
	}
	return errors.Join(errs...)
}

func equalRules(a, b []rbacv1.PolicyRule) bool {
	return len(a) == 0 && len(b) == 0 || reflect.DeepEqual(a, b)
}

// Aggregate returns the rules r's aggregationRule gives it from roles
// (kube's ClusterRoleAggregationController.syncClusterRole): the rules of
// each other role any selector matches, in name order, without repeats.
func Aggregate(r *rbacv1.ClusterRole, roles []*rbacv1.ClusterRole) []rbacv1.PolicyRule {
	var rules []rbacv1.PolicyRule
	names := map[string]bool{}
	var matched []*rbacv1.ClusterRole
	for _, sel := range r.AggregationRule.ClusterRoleSelectors {
		s, err := metav1.LabelSelectorAsSelector(&sel)
		if err != nil {
			continue
		}
		for _, c := range roles {
			if c.Name != r.Name && !names[c.Name] && s.Matches(labels.Set(c.Labels)) {
				names[c.Name] = true
				matched = append(matched, c)
			}
		}
	}
	slices.SortFunc(matched, func(x, y *rbacv1.ClusterRole) int { return strings.Compare(x.Name, y.Name) })
	for _, c := range matched {
		for _, rule := range c.Rules {
			if !slices.ContainsFunc(rules, func(have rbacv1.PolicyRule) bool { return reflect.DeepEqual(have, rule) }) {
				rules = append(rules, rule)
			}
		}
	}
	return rules
}
