package rbac

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/cairn-dev/cairn/services/apiserver"
)

// Escalation is the admission plugin for what kube's RBAC storage checks
// (pkg/registry/rbac/*/policybased): writing a Role or ClusterRole whose
// rules its author does not hold needs the `escalate` verb on it; writing
// a binding needs `bind` on its role or holding all of the role's rules; a
// ClusterRole with an aggregationRule needs full authority (or escalate).
// Members of system:masters are never checked. A refusal is kube's 403.
type Escalation struct {
	az *Authorizer
}

var _ apiserver.AdmissionPlugin = (*Escalation)(nil)

// NewEscalation checks writes against az's policy.
func NewEscalation(az *Authorizer) *Escalation { return &Escalation{az: az} }

// Name implements apiserver.AdmissionPlugin.
func (*Escalation) Name() string { return "RBACEscalation" }

// fullAuthority is what an aggregated ClusterRole may come to hold.
var fullAuthority = []rbacv1.PolicyRule{
	{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}},
	{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}},
}

// Admit implements apiserver.AdmissionPlugin.
func (e *Escalation) Admit(ctx context.Context, a *apiserver.AdmissionRequest) error {
	if a.Resource.GroupVersion.Group != rbacv1.GroupName || a.Subresource != "" ||
		(a.Operation != "CREATE" && a.Operation != "UPDATE") || slices.Contains(a.User.Groups, apiserver.GroupMasters) {
		return nil
	}
	switch obj := a.Object.(type) {
	case *rbacv1.Role:
		if old, ok := a.OldObject.(*rbacv1.Role); ok && reflect.DeepEqual(old.Rules, obj.Rules) {
			return nil
		}
		return e.role(ctx, a, obj.Rules)
	case *rbacv1.ClusterRole:
		if old, ok := a.OldObject.(*rbacv1.ClusterRole); ok && reflect.DeepEqual(old.Rules, obj.Rules) &&
			reflect.DeepEqual(old.AggregationRule, obj.AggregationRule) {
			return nil
		}
		rules := obj.Rules
		if obj.AggregationRule != nil {
			rules = fullAuthority
		}
		return e.role(ctx, a, rules)
	case *rbacv1.RoleBinding:
		return e.binding(ctx, a, obj.RoleRef)
	case *rbacv1.ClusterRoleBinding:
		return e.binding(ctx, a, obj.RoleRef)
	}
	return nil
}

// role is kube's RoleEscalationAuthorized, then ConfirmNoEscalation.
func (e *Escalation) role(ctx context.Context, a *apiserver.AdmissionRequest, rules []rbacv1.PolicyRule) error {
	if ok, _ := e.az.Authorize(ctx, apiserver.Attributes{User: a.User, Verb: "escalate", APIGroup: rbacv1.GroupName,
		Resource: a.Resource.Plural, Namespace: a.Namespace, Name: a.Name}); ok {
		return nil
	}
	return e.confirmNoEscalation(a, rules)
}

// binding is kube's BindingAuthorized, then ConfirmNoEscalation against
// the role's rules.
func (e *Escalation) binding(ctx context.Context, a *apiserver.AdmissionRequest, ref rbacv1.RoleRef) error {
	resource := "roles"
	if ref.Kind == "ClusterRole" {
		resource = "clusterroles"
	}
	if ok, _ := e.az.Authorize(ctx, apiserver.Attributes{User: a.User, Verb: "bind", APIGroup: rbacv1.GroupName,
		Resource: resource, Namespace: a.Namespace, Name: ref.Name}); ok {
		return nil
	}
	rules, err := roleRules(e.az.policy, ref, a.Namespace)
	if err != nil {
		return apierrors.NewForbidden(a.Resource.GroupResource(), a.Name, err)
	}
	return e.confirmNoEscalation(a, rules)
}

func (e *Escalation) confirmNoEscalation(a *apiserver.AdmissionRequest, rules []rbacv1.PolicyRule) error {
	owner, errs := e.az.Rules(a.User, a.Namespace)
	ok, missing := Covers(owner, rules)
	if ok {
		return nil
	}
	var lines []string
	for _, r := range compact(missing) {
		lines = append(lines, CompactString(r))
	}
	slices.Sort(lines)
	lines = slices.Compact(lines)
	msg := fmt.Sprintf("user %q (groups=%q) is attempting to grant RBAC permissions not currently held:\n%s",
		a.User.User, a.User.Groups, strings.Join(lines, "\n"))
	if len(errs) > 0 {
		msg += fmt.Sprintf("; resolution errors: %v", errs)
	}
	return apierrors.NewForbidden(a.Resource.GroupResource(), a.Name, errors.New(msg))
}
