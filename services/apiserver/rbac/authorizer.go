package rbac

import (
	"context"
	"fmt"
	"slices"
	"sync"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/cairn-dev/cairn/services/apiserver"
)

// Policy is where the authorizer finds roles and bindings. Implementations
// answer from memory and are safe for concurrent use; the objects they hand
// out are shared and must not be modified.
type Policy interface {
	// VisitClusterRoleBindings calls fn for every ClusterRoleBinding until
	// fn returns false.
	VisitClusterRoleBindings(fn func(*rbacv1.ClusterRoleBinding) bool)
	// VisitRoleBindings calls fn for every RoleBinding of namespace until
	// fn returns false.
	VisitRoleBindings(namespace string, fn func(*rbacv1.RoleBinding) bool)
	ClusterRole(name string) (*rbacv1.ClusterRole, bool)
	Role(namespace, name string) (*rbacv1.Role, bool)
}

// Authorizer is kube's RBAC authorizer behind its privileged-group
// authorizer for system:masters. It implements apiserver.Authorizer and
// apiserver.RuleLister.
type Authorizer struct {
	policy Policy
}

var (
	_ apiserver.Authorizer = (*Authorizer)(nil)
	_ apiserver.RuleLister = (*Authorizer)(nil)
)

// NewAuthorizer decides from p.
func NewAuthorizer(p Policy) *Authorizer { return &Authorizer{policy: p} }

// Authorize implements apiserver.Authorizer. An allowed request's reason
// names the binding that allowed it; a denied one's names the roles that
// bindings of the user refer to and that do not exist.
func (az *Authorizer) Authorize(_ context.Context, a apiserver.Attributes) (bool, string) {
	if slices.Contains(a.User.Groups, apiserver.GroupMasters) {
		return true, ""
	}
	var (
		allowed bool
		reason  string
		errs    []error
	)
	VisitRulesFor(az.policy, a.User, a.Namespace, func(source fmt.Stringer, rule *rbacv1.PolicyRule, err error) bool {
		if err != nil {
			errs = append(errs, err)
			return true
		}
		if RuleAllows(a, rule) {
			allowed, reason = true, "RBAC: allowed by "+source.String()
			return false
		}
		return true
	})
	if allowed {
		return true, reason
	}
	if len(errs) > 0 {
		return false, "RBAC: " + aggregate(errs)
	}
	return false, ""
}

// aggregate is utilerrors.NewAggregate's message: one error as it is,
// several in brackets.
func aggregate(errs []error) string {
	if len(errs) == 1 {
		return errs[0].Error()
	}
	msg := "["
	for i, e := range errs {
		if i > 0 {
			msg += ", "
		}
		msg += e.Error()
	}
	return msg + "]"
}

// Rules is every rule u holds in namespace (cluster-wide ones included),
// and the errors resolving them (missing roles), as kube's RulesFor.
func (az *Authorizer) Rules(u apiserver.User, namespace string) ([]rbacv1.PolicyRule, []error) {
	if slices.Contains(u.Groups, apiserver.GroupMasters) {
		return []rbacv1.PolicyRule{
			{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}},
			{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}},
		}, nil
	}
	var (
		rules []rbacv1.PolicyRule
		errs  []error
	)
	VisitRulesFor(az.policy, u, namespace, func(_ fmt.Stringer, rule *rbacv1.PolicyRule, err error) bool {
		if err != nil {
			errs = append(errs, err)
		} else {
			rules = append(rules, *rule)
		}
		return true
	})
	return rules, errs
}

// RulesFor implements apiserver.RuleLister (SelfSubjectRulesReview).
func (az *Authorizer) RulesFor(u apiserver.User, namespace string) authorizationv1.SubjectRulesReviewStatus {
	rules, errs := az.Rules(u, namespace)
	st := authorizationv1.SubjectRulesReviewStatus{ResourceRules: []authorizationv1.ResourceRule{}, NonResourceRules: []authorizationv1.NonResourceRule{}}
	for _, r := range rules {
		if len(r.NonResourceURLs) > 0 {
			st.NonResourceRules = append(st.NonResourceRules, authorizationv1.NonResourceRule{Verbs: r.Verbs, NonResourceURLs: r.NonResourceURLs})
			continue
		}
		st.ResourceRules = append(st.ResourceRules, authorizationv1.ResourceRule{Verbs: r.Verbs, APIGroups: r.APIGroups,
			Resources: r.Resources, ResourceNames: r.ResourceNames})
	}
	if len(errs) > 0 {
		st.Incomplete, st.EvaluationError = true, aggregate(errs)
	}
	return st
}

// VisitRulesFor calls visit with every rule u holds in namespace (kube's
// DefaultRuleResolver.VisitRulesFor): the rules of the ClusterRoles of the
// ClusterRoleBindings that name u, then, if namespace is not empty, of the
// roles of that namespace's RoleBindings that name u. A binding whose role
// is missing is visited as an error. It stops when visit returns false.
func VisitRulesFor(p Policy, u apiserver.User, namespace string, visit func(source fmt.Stringer, rule *rbacv1.PolicyRule, err error) bool) {
	more := true
	p.VisitClusterRoleBindings(func(b *rbacv1.ClusterRoleBinding) bool {
		i, ok := appliesTo(u, b.Subjects, "")
		if !ok {
			return true
		}
		rules, err := roleRules(p, b.RoleRef, "")
		if err != nil {
			more = visit(nil, nil, err)
			return more
		}
		src := &bindingSource{kind: "ClusterRoleBinding", name: b.Name, ref: b.RoleRef, subject: &b.Subjects[i]}
		for j := range rules {
			if more = visit(src, &rules[j], nil); !more {
				return false
			}
		}
		return true
	})
	if !more || namespace == "" {
		return
	}
	p.VisitRoleBindings(namespace, func(b *rbacv1.RoleBinding) bool {
		i, ok := appliesTo(u, b.Subjects, namespace)
		if !ok {
			return true
		}
		rules, err := roleRules(p, b.RoleRef, namespace)
		if err != nil {
			return visit(nil, nil, err)
		}
		src := &bindingSource{kind: "RoleBinding", name: b.Name + "/" + b.Namespace, namespace: b.Namespace, ref: b.RoleRef, subject: &b.Subjects[i]}
		for j := range rules {
			if !visit(src, &rules[j], nil) {
				return false
			}
		}
		return true
	})
}

// roleRules are the rules of the role a binding refers to (kube's
// GetRoleReferenceRules).
func roleRules(p Policy, ref rbacv1.RoleRef, namespace string) ([]rbacv1.PolicyRule, error) {
	switch ref.Kind {
	case "Role":
		if r, ok := p.Role(namespace, ref.Name); ok {
			return r.Rules, nil
		}
		return nil, apierrors.NewNotFound(rbacv1.Resource("role"), ref.Name)
	case "ClusterRole":
		if r, ok := p.ClusterRole(ref.Name); ok {
			return r.Rules, nil
		}
		return nil, apierrors.NewNotFound(rbacv1.Resource("clusterrole"), ref.Name)
	}
	return nil, fmt.Errorf("unsupported role reference kind: %q", ref.Kind)
}

// bindingSource describes the binding that granted a rule, as kube's
// clusterRoleBindingDescriber and roleBindingDescriber do.
type bindingSource struct {
	kind, name, namespace string
	ref                   rbacv1.RoleRef
	subject               *rbacv1.Subject
}

func (s *bindingSource) String() string {
	return fmt.Sprintf("%s %q of %s %q to %s", s.kind, s.name, s.ref.Kind, s.ref.Name, describeSubject(s.subject, s.namespace))
}

func describeSubject(s *rbacv1.Subject, bindingNamespace string) string {
	if s.Kind == rbacv1.ServiceAccountKind {
		ns := s.Namespace
		if ns == "" {
			ns = bindingNamespace
		}
		return fmt.Sprintf("%s %q", s.Kind, s.Name+"/"+ns)
	}
	return fmt.Sprintf("%s %q", s.Kind, s.Name)
}

// StaticPolicy is a fixed Policy, for tests and tools. It is indexed on
// first use and must not be modified afterwards.
type StaticPolicy struct {
	ClusterRoles        []*rbacv1.ClusterRole
	ClusterRoleBindings []*rbacv1.ClusterRoleBinding
	Roles               []*rbacv1.Role
	RoleBindings        []*rbacv1.RoleBinding

	once         sync.Once
	idx          bindings
	clusterRoles map[string]*rbacv1.ClusterRole
	roles        map[[2]string]*rbacv1.Role
}

var _ Policy = (*StaticPolicy)(nil)

func (p *StaticPolicy) index() {
	p.once.Do(func() {
		p.idx = newBindings()
		for _, b := range p.ClusterRoleBindings {
			p.idx.putCRB(b)
		}
		for _, b := range p.RoleBindings {
			p.idx.putRB(b)
		}
		p.clusterRoles = map[string]*rbacv1.ClusterRole{}
		for _, r := range p.ClusterRoles {
			p.clusterRoles[r.Name] = r
		}
		p.roles = map[[2]string]*rbacv1.Role{}
		for _, r := range p.Roles {
			p.roles[[2]string{r.Namespace, r.Name}] = r
		}
	})
}

// VisitClusterRoleBindings implements Policy.
func (p *StaticPolicy) VisitClusterRoleBindings(fn func(*rbacv1.ClusterRoleBinding) bool) {
	p.index()
	p.idx.VisitClusterRoleBindings(fn)
}

// VisitRoleBindings implements Policy.
func (p *StaticPolicy) VisitRoleBindings(namespace string, fn func(*rbacv1.RoleBinding) bool) {
	p.index()
	p.idx.VisitRoleBindings(namespace, fn)
}

// ClusterRole implements Policy.
func (p *StaticPolicy) ClusterRole(name string) (*rbacv1.ClusterRole, bool) {
	p.index()
	r, ok := p.clusterRoles[name]
	return r, ok
}

// Role implements Policy.
func (p *StaticPolicy) Role(namespace, name string) (*rbacv1.Role, bool) {
	p.index()
	r, ok := p.roles[[2]string{namespace, name}]
	return r, ok
}
