package rbac

import (
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/cairn-dev/cairn/services/apiserver"
)

// TestRuleAllows ports the cases of kube's TestRuleMatches and
// TestRuleMatchesNonResource (plugin/pkg/auth/authorizer/rbac).
func TestRuleAllows(t *testing.T) {
	res := func(verb, group, resource, sub, name string) apiserver.Attributes {
		return apiserver.Attributes{Verb: verb, APIGroup: group, Resource: resource, Subresource: sub, Name: name, Namespace: "ns"}
	}
	path := func(verb, p string) apiserver.Attributes { return apiserver.Attributes{Verb: verb, Path: p} }
	r := func(verbs, groups, resources, names []string) rbacv1.PolicyRule {
		return rbacv1.PolicyRule{Verbs: verbs, APIGroups: groups, Resources: resources, ResourceNames: names}
	}
	nr := func(verbs, urls []string) rbacv1.PolicyRule {
		return rbacv1.PolicyRule{Verbs: verbs, NonResourceURLs: urls}
	}
	s := func(v ...string) []string { return v }
	tests := []struct {
		name string
		rule rbacv1.PolicyRule
		a    apiserver.Attributes
		want bool
	}{
		{"star verb, exact match other", r(s("*"), s("group1"), s("resource1"), nil), res("get", "group1", "resource1", "", ""), true},
		{"star group, exact match other", r(s("get"), s("*"), s("resource1"), nil), res("get", "group1", "resource1", "", ""), true},
		{"star resource, exact match other", r(s("get"), s("group1"), s("*"), nil), res("get", "group1", "resource1", "", ""), true},
		{"star resource matches subresources", r(s("get"), s("group1"), s("*"), nil), res("get", "group1", "resource1", "status", ""), true},
		{"tuple expansion", r(s("get", "list"), s("group1", "group2"), s("resource1", "resource2"), nil), res("list", "group2", "resource1", "", ""), true},
		{"verb mismatch", r(s("get"), s("*"), s("*"), nil), res("list", "g", "r", "", ""), false},
		{"group mismatch", r(s("*"), s("group1"), s("*"), nil), res("get", "group2", "r", "", ""), false},
		{"core group is the empty string", r(s("*"), s(""), s("pods"), nil), res("get", "", "pods", "", ""), true},
		{"resource mismatch", r(s("*"), s("*"), s("pods"), nil), res("get", "", "secrets", "", ""), false},
		{"subresource exact", r(s("get"), s(""), s("pods/status"), nil), res("get", "", "pods", "status", ""), true},
		{"subresource rule does not give the resource", r(s("get"), s(""), s("pods/status"), nil), res("get", "", "pods", "", ""), false},
		{"resource rule does not give its subresources", r(s("get"), s(""), s("pods"), nil), res("get", "", "pods", "status", ""), false},
		{"star subresource form */status", r(s("get"), s("*"), s("*/status"), nil), res("get", "apps", "deployments", "status", ""), true},
		{"*/status is not the resource", r(s("get"), s("*"), s("*/status"), nil), res("get", "apps", "deployments", "", ""), false},
		{"*/status is not another subresource", r(s("get"), s("*"), s("*/status"), nil), res("get", "", "pods", "log", ""), false},
		{"pods/* is not kube syntax", r(s("get"), s(""), s("pods/*"), nil), res("get", "", "pods", "status", ""), false},
		{"resource name match", r(s("get"), s(""), s("secrets"), s("a", "b")), res("get", "", "secrets", "", "b"), true},
		{"resource name mismatch", r(s("get"), s(""), s("secrets"), s("a")), res("get", "", "secrets", "", "c"), false},
		{"resource names never match a list", r(s("list"), s(""), s("secrets"), s("a")), res("list", "", "secrets", "", ""), false},
		{"resource rule never matches a path", r(s("*"), s("*"), s("*"), nil), path("get", "/api"), false},
		{"non-resource star", nr(s("get"), s("*")), path("get", "/anything"), true},
		{"non-resource exact", nr(s("get"), s("/healthz")), path("get", "/healthz"), true},
		{"non-resource exact is not a prefix", nr(s("get"), s("/healthz")), path("get", "/healthz/etcd"), false},
		{"non-resource prefix", nr(s("get"), s("/apis/*")), path("get", "/apis/apps/v1"), true},
		{"non-resource prefix needs its slash", nr(s("get"), s("/apis/*")), path("get", "/apis"), false},
		{"non-resource bare prefix", nr(s("get"), s("/api*")), path("get", "/apis"), true},
		{"non-resource verb mismatch", nr(s("get"), s("*")), path("post", "/api"), false},
		{"non-resource rule never matches a resource", nr(s("*"), s("*")), res("get", "", "pods", "", ""), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := RuleAllows(tt.a, &tt.rule); got != tt.want {
				t.Errorf("RuleAllows(%+v, %+v) = %v, want %v", tt.a, tt.rule, got, tt.want)
			}
		})
	}
}

func TestAppliesToUser(t *testing.T) {
	alice := apiserver.User{User: "alice", Groups: []string{"devs", "system:authenticated"}}
	sa := apiserver.User{User: "system:serviceaccount:ns1:builder", Groups: ServiceAccountGroups("ns1")}
	tests := []struct {
		name    string
		u       apiserver.User
		subject rbacv1.Subject
		ns      string
		want    bool
	}{
		{"user", alice, rbacv1.Subject{Kind: "User", Name: "alice"}, "", true},
		{"other user", alice, rbacv1.Subject{Kind: "User", Name: "bob"}, "", false},
		{"group", alice, rbacv1.Subject{Kind: "Group", Name: "devs"}, "", true},
		{"user name is no group", alice, rbacv1.Subject{Kind: "Group", Name: "alice"}, "", false},
		{"service account", sa, rbacv1.Subject{Kind: "ServiceAccount", Namespace: "ns1", Name: "builder"}, "", true},
		{"service account of the binding's namespace", sa, rbacv1.Subject{Kind: "ServiceAccount", Name: "builder"}, "ns1", true},
		{"service account elsewhere", sa, rbacv1.Subject{Kind: "ServiceAccount", Name: "builder"}, "ns2", false},
		{"service account without a namespace", sa, rbacv1.Subject{Kind: "ServiceAccount", Name: "builder"}, "", false},
		{"service accounts group", sa, rbacv1.Subject{Kind: "Group", Name: "system:serviceaccounts"}, "", true},
		{"service accounts of a namespace", sa, rbacv1.Subject{Kind: "Group", Name: "system:serviceaccounts:ns1"}, "", true},
		{"a user is no service account", apiserver.User{User: "builder"}, rbacv1.Subject{Kind: "ServiceAccount", Namespace: "ns1", Name: "builder"}, "", false},
		{"unknown kind", alice, rbacv1.Subject{Kind: "Robot", Name: "alice"}, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := appliesToUser(tt.u, &tt.subject, tt.ns); got != tt.want {
				t.Errorf("appliesToUser = %v, want %v", got, tt.want)
			}
		})
	}
}
