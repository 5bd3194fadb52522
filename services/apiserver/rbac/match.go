package rbac

import (
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/cairn-dev/cairn/services/apiserver"
)

// RuleAllows reports whether rule grants the request a (kube's
// rbac.RuleAllows): resource requests match verbs, API groups, resources
// ("pods", "pods/status", "*/status" or "*") and resource names; others
// match verbs and non-resource URLs (exact, "*", or a prefix ending in "*").
func RuleAllows(a apiserver.Attributes, rule *rbacv1.PolicyRule) bool {
	if !verbMatches(rule, a.Verb) {
		return false
	}
	if a.Resource == "" {
		return nonResourceURLMatches(rule, a.Path)
	}
	combined := a.Resource
	if a.Subresource != "" {
		combined += "/" + a.Subresource
	}
	return apiGroupMatches(rule, a.APIGroup) && resourceMatches(rule, combined, a.Subresource) &&
		resourceNameMatches(rule, a.Name)
}

func verbMatches(rule *rbacv1.PolicyRule, verb string) bool {
	return slices.Contains(rule.Verbs, rbacv1.VerbAll) || slices.Contains(rule.Verbs, verb)
}

func apiGroupMatches(rule *rbacv1.PolicyRule, group string) bool {
	return slices.Contains(rule.APIGroups, rbacv1.APIGroupAll) || slices.Contains(rule.APIGroups, group)
}

func resourceMatches(rule *rbacv1.PolicyRule, combined, subresource string) bool {
	for _, r := range rule.Resources {
		if r == rbacv1.ResourceAll || r == combined {
			return true
		}
		// "*/status" matches the status of every resource.
		if subresource != "" && len(r) == len(subresource)+2 && strings.HasPrefix(r, "*/") && strings.HasSuffix(r, subresource) {
			return true
		}
	}
	return false
}

func resourceNameMatches(rule *rbacv1.PolicyRule, name string) bool {
	return len(rule.ResourceNames) == 0 || slices.Contains(rule.ResourceNames, name)
}

func nonResourceURLMatches(rule *rbacv1.PolicyRule, path string) bool {
	for _, u := range rule.NonResourceURLs {
		if u == rbacv1.NonResourceAll || u == path {
			return true
		}
		if prefix, ok := strings.CutSuffix(u, "*"); ok && strings.HasPrefix(path, strings.TrimRight(prefix, "*")) {
			return true
		}
	}
	return false
}

// ServiceAccountUsername is the username of a ServiceAccount's tokens.
func ServiceAccountUsername(namespace, name string) string {
	return ServiceAccountUsernamePrefix + namespace + ":" + name
}

// ServiceAccount users and groups, as kube spells them.
const (
	ServiceAccountUsernamePrefix = "system:serviceaccount:"
	AllServiceAccountsGroup      = "system:serviceaccounts"
)

// ServiceAccountGroups are the groups of a ServiceAccount's tokens.
func ServiceAccountGroups(namespace string) []string {
	return []string{AllServiceAccountsGroup, AllServiceAccountsGroup + ":" + namespace}
}

// appliesTo returns the index of the first subject that names u (kube's
// appliesTo). A ServiceAccount subject without a namespace means one in the
// binding's namespace.
func appliesTo(u apiserver.User, subjects []rbacv1.Subject, namespace string) (int, bool) {
	for i := range subjects {
		if appliesToUser(u, &subjects[i], namespace) {
			return i, true
		}
	}
	return 0, false
}

func appliesToUser(u apiserver.User, s *rbacv1.Subject, namespace string) bool {
	switch s.Kind {
	case rbacv1.UserKind:
		return u.User == s.Name
	case rbacv1.GroupKind:
		return slices.Contains(u.Groups, s.Name)
	case rbacv1.ServiceAccountKind:
		ns := namespace
		if s.Namespace != "" {
			ns = s.Namespace
		}
		if ns == "" {
			return false
		}
		rest, ok := strings.CutPrefix(u.User, ServiceAccountUsernamePrefix)
		return ok && rest == ns+":"+s.Name
	}
	return false
}
