package rbac

import (
	"fmt"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
)

// Covers reports whether owner's rules grant everything servant's do
// (kube's component-helpers validation.Covers), and the rules they do not
// cover, broken down to one group, resource, verb and name each.
func Covers(owner, servant []rbacv1.PolicyRule) (bool, []rbacv1.PolicyRule) {
	var missing []rbacv1.PolicyRule
	for _, s := range servant {
		for _, sub := range breakdown(s) {
			if !slices.ContainsFunc(owner, func(o rbacv1.PolicyRule) bool { return ruleCovers(o, sub) }) {
				missing = append(missing, sub)
			}
		}
	}
	return len(missing) == 0, missing
}

// breakdown is BreakdownRule: one rule per group, resource, verb and
// resource name, and per non-resource URL and verb.
func breakdown(r rbacv1.PolicyRule) []rbacv1.PolicyRule {
	var out []rbacv1.PolicyRule
	for _, g := range r.APIGroups {
		for _, res := range r.Resources {
			for _, v := range r.Verbs {
				if len(r.ResourceNames) == 0 {
					out = append(out, rbacv1.PolicyRule{APIGroups: []string{g}, Resources: []string{res}, Verbs: []string{v}})
					continue
				}
				for _, n := range r.ResourceNames {
					out = append(out, rbacv1.PolicyRule{APIGroups: []string{g}, Resources: []string{res}, Verbs: []string{v}, ResourceNames: []string{n}})
				}
			}
		}
	}
	for _, u := range r.NonResourceURLs {
		for _, v := range r.Verbs {
			out = append(out, rbacv1.PolicyRule{NonResourceURLs: []string{u}, Verbs: []string{v}})
		}
	}
	return out
}

func hasAll(set, want []string) bool {
	for _, w := range want {
		if !slices.Contains(set, w) {
			return false
		}
	}
	return true
}

func resourceCoversAll(set, covers []string) bool {
	if slices.Contains(set, rbacv1.ResourceAll) || hasAll(set, covers) {
		return true
	}
	for _, p := range covers {
		if slices.Contains(set, p) {
			continue
		}
		_, sub, ok := strings.Cut(p, "/")
		if !ok || !slices.Contains(set, "*/"+sub) {
			return false
		}
	}
	return true
}

func nonResourceURLsCoverAll(set, covers []string) bool {
	for _, p := range covers {
		if !slices.ContainsFunc(set, func(owner string) bool {
			return owner == p || strings.HasSuffix(owner, "*") && strings.HasPrefix(p, strings.TrimRight(owner, "*"))
		}) {
			return false
		}
	}
	return true
}

// ruleCovers reports whether owner covers sub, a rule of breakdown.
func ruleCovers(owner, sub rbacv1.PolicyRule) bool {
	verbs := slices.Contains(owner.Verbs, rbacv1.VerbAll) || hasAll(owner.Verbs, sub.Verbs)
	groups := slices.Contains(owner.APIGroups, rbacv1.APIGroupAll) || hasAll(owner.APIGroups, sub.APIGroups)
	names := len(owner.ResourceNames) == 0 || len(sub.ResourceNames) > 0 && hasAll(owner.ResourceNames, sub.ResourceNames)
	return verbs && groups && names && resourceCoversAll(owner.Resources, sub.Resources) &&
		nonResourceURLsCoverAll(owner.NonResourceURLs, sub.NonResourceURLs)
}

// compact merges rules of one group and one resource without names into
// one rule with all their verbs (kube's CompactRules), keeping the order
// in which each group and resource first appears.
func compact(rules []rbacv1.PolicyRule) []rbacv1.PolicyRule {
	var out []rbacv1.PolicyRule
	at := map[[2]string]int{}
	for _, r := range rules {
		if len(r.APIGroups) != 1 || len(r.Resources) != 1 || len(r.ResourceNames) > 0 || len(r.NonResourceURLs) > 0 {
			out = append(out, r)
			continue
		}
		k := [2]string{r.APIGroups[0], r.Resources[0]}
		if i, ok := at[k]; ok {
			for _, v := range r.Verbs {
				if !slices.Contains(out[i].Verbs, v) {
					out[i].Verbs = append(out[i].Verbs, v)
				}
			}
			continue
		}
		at[k] = len(out)
		r.Verbs = slices.Clone(r.Verbs)
		out = append(out, r)
	}
	return out
}

// CompactString is kube's rbacv1helpers.CompactString, the form escalation
// errors list missing rules in.
func CompactString(r rbacv1.PolicyRule) string {
	var parts []string
	var args []any
	add := func(name string, v []string) {
		if len(v) > 0 {
			parts = append(parts, name+":%q")
			args = append(args, v)
		}
	}
	add("APIGroups", r.APIGroups)
	add("Resources", r.Resources)
	add("NonResourceURLs", r.NonResourceURLs)
	add("ResourceNames", r.ResourceNames)
	add("Verbs", r.Verbs)
	return fmt.Sprintf("{"+strings.Join(parts, ", ")+"}", args...)
}
