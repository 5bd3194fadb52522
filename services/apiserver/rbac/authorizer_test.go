package rbac

import (
	"context"
	"fmt"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cairn-dev/cairn/services/apiserver"
)

// bootstrapPolicy is the bootstrap policy, aggregated, as a StaticPolicy.
func bootstrapPolicy() *StaticPolicy {
	p := &StaticPolicy{ClusterRoles: BootstrapClusterRoles(), ClusterRoleBindings: BootstrapClusterRoleBindings()}
	for range 3 {
		for _, r := range p.ClusterRoles {
			if r.AggregationRule != nil {
				r.Rules = Aggregate(r, p.ClusterRoles)
			}
		}
	}
	return p
}

// TestBootstrapPolicy: what each of cairn's identities may do under kube's
// bootstrap policy (the cases of the built-in policy it replaces; where
// kube's policy says otherwise the case says so).
func TestBootstrapPolicy(t *testing.T) {
	var (
		admin      = apiserver.User{User: "admin", Groups: []string{apiserver.GroupMasters, apiserver.GroupAuthenticated}}
		controller = apiserver.User{User: apiserver.UserControllers, Groups: []string{apiserver.GroupAuthenticated}}
		scheduler  = apiserver.User{User: apiserver.UserScheduler, Groups: []string{apiserver.GroupAuthenticated}}
		node       = apiserver.User{User: "system:node:n1", Groups: []string{apiserver.GroupNodes, apiserver.GroupAuthenticated}}
		alice      = apiserver.User{User: "alice", Groups: []string{apiserver.GroupAuthenticated}}
		monitor    = apiserver.User{User: "prometheus", Groups: []string{"system:monitoring", apiserver.GroupAuthenticated}}
		anonymous  = apiserver.User{User: apiserver.UserAnonymous, Groups: []string{apiserver.GroupUnauthenticated}}
	)
	res := func(u apiserver.User, verb, group, resource, sub string) apiserver.Attributes {
		return apiserver.Attributes{User: u, Verb: verb, APIGroup: group, Resource: resource, Subresource: sub, Namespace: "default"}
	}
	path := func(u apiserver.User, verb, p string) apiserver.Attributes {
		return apiserver.Attributes{User: u, Verb: verb, Path: p}
	}
	cases := []struct {
		name string
		a    apiserver.Attributes
		want bool
	}{
		{"masters delete anything", res(admin, "delete", "apps", "deployments", ""), true},
		{"anonymous metrics", path(anonymous, "get", "/metrics"), false},
		{"controller manager writes workloads", res(controller, "create", "", "pods", ""), true},
		{"scheduler binds", res(scheduler, "create", "", "pods", "binding"), true},
		{"scheduler reads priority classes", res(scheduler, "list", "scheduling.k8s.io", "priorityclasses", ""), true},
		{"scheduler writes pod status", res(scheduler, "patch", "", "pods", "status"), true},
		{"scheduler may not read secrets", res(scheduler, "get", "", "secrets", ""), false},
		{"node reads anything", res(node, "list", "", "secrets", ""), true},
		{"node writes its node", res(node, "update", "", "nodes", "status"), true},
		{"node renews leases", res(node, "update", "coordination.k8s.io", "leases", ""), true},
		{"node writes events", res(node, "create", "", "events", ""), true},
		{"node writes pod status", res(node, "patch", "", "pods", "status"), true},
		{"node deletes pods", res(node, "delete", "", "pods", ""), true},
		{"node creates mirror pods", res(node, "create", "", "pods", ""), true},
		{"node may not update pod specs", res(node, "update", "", "pods", ""), false},
		{"node may not write deployments", res(node, "create", "apps", "deployments", ""), false},
		{"user may not read pods", res(alice, "get", "", "pods", ""), false},
		{"user reads discovery", path(alice, "get", "/apis"), true},
		{"user reads openapi", path(alice, "get", "/openapi/v3/apis/apps/v1"), true},
		{"user asks what it may do", res(alice, "create", "authorization.k8s.io", "selfsubjectaccessreviews", ""), true},
		{"user asks who it is", res(alice, "create", "authentication.k8s.io", "selfsubjectreviews", ""), true},
		{"user may not read reviews", res(alice, "list", "authorization.k8s.io", "selfsubjectaccessreviews", ""), false},
		{"review in another group is a resource like any", res(alice, "create", "example.com", "selfsubjectreviews", ""), false},
		{"anonymous health", path(anonymous, "get", "/healthz"), true},
		{"anonymous version", path(anonymous, "get", "/version"), true},
		{"anonymous head", path(anonymous, "get", "/readyz"), true},
		// kube: /metrics is system:monitoring's.
		{"user may not read metrics", path(alice, "get", "/metrics"), false},
		{"monitoring reads metrics", path(monitor, "get", "/metrics"), true},
		{"user asks what rules it has", res(alice, "create", "authorization.k8s.io", "selfsubjectrulesreviews", ""), true},
		// kube: system:node neither binds pods nor execs into them.
		{"node may not bind", res(node, "create", "", "pods", "binding"), false},
		{"node reads logs", res(node, "get", "", "pods", "log"), true},
		{"node may not exec", res(node, "create", "", "pods", "exec"), false},
		{"anonymous discovery", path(anonymous, "get", "/api"), false},
		{"anonymous review", res(anonymous, "create", "authentication.k8s.io", "selfsubjectreviews", ""), false},
		{"user may not write roles", res(alice, "create", "rbac.authorization.k8s.io", "roles", ""), false},
	}
	az := NewAuthorizer(bootstrapPolicy())
	for _, c := range cases {
		if got, reason := az.Authorize(context.Background(), c.a); got != c.want {
			t.Errorf("%s: %+v allowed = %v (%s), want %v", c.name, c.a, got, reason, c.want)
		}
	}
}

func TestAggregatedRoles(t *testing.T) {
	p := bootstrapPolicy()
	az := NewAuthorizer(&StaticPolicy{ClusterRoles: p.ClusterRoles, RoleBindings: []*rbacv1.RoleBinding{
		roleBinding("ns", "a", "ClusterRole", "admin", user("ann")),
		roleBinding("ns", "e", "ClusterRole", "edit", user("ed")),
		roleBinding("ns", "v", "ClusterRole", "view", user("vi")),
	}})
	u := func(name string) apiserver.User { return apiserver.User{User: name} }
	res := func(verb, group, resource string) apiserver.Attributes {
		return apiserver.Attributes{Verb: verb, APIGroup: group, Resource: resource, Namespace: "ns"}
	}
	for _, c := range []struct {
		user string
		a    apiserver.Attributes
		want bool
	}{
		{"vi", res("list", "apps", "deployments"), true},
		{"vi", res("get", "", "secrets"), false},
		{"vi", res("create", "apps", "deployments"), false},
		{"ed", res("create", "apps", "deployments"), true},
		{"ed", res("get", "", "secrets"), true},
		{"ed", res("create", "rbac.authorization.k8s.io", "rolebindings"), false},
		{"ann", res("create", "rbac.authorization.k8s.io", "rolebindings"), true},
		{"ann", res("list", "", "pods"), true},
	} {
		c.a.User = u(c.user)
		if got, _ := az.Authorize(context.Background(), c.a); got != c.want {
			t.Errorf("%s %s %s: %v, want %v", c.user, c.a.Verb, c.a.Resource, got, c.want)
		}
	}
}

func roleBinding(ns, name, kind, role string, subjects ...rbacv1.Subject) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacGroup, Kind: kind, Name: role}, Subjects: subjects}
}

func nsRole(ns, name string, rules ...rbacv1.PolicyRule) *rbacv1.Role {
	return &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Rules: rules}
}

// TestAuthorizer follows kube's TestAuthorizer: namespaced roles apply in
// their namespace only, cluster roles bound in a namespace only there, and
// reasons name the binding (allowed) or the missing role (denied).
func TestAuthorizer(t *testing.T) {
	pods := rule(verbs("get", "list"), groups(""), "pods")
	p := &StaticPolicy{
		ClusterRoles: []*rbacv1.ClusterRole{{ObjectMeta: metav1.ObjectMeta{Name: "reader"}, Rules: []rbacv1.PolicyRule{pods}}},
		ClusterRoleBindings: []*rbacv1.ClusterRoleBinding{{ObjectMeta: metav1.ObjectMeta{Name: "readers"},
			RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "reader"}, Subjects: []rbacv1.Subject{{Kind: "Group", Name: "readers"}}}},
		Roles: []*rbacv1.Role{nsRole("ns1", "writer", rule(verbs("create"), groups(""), "pods"))},
		RoleBindings: []*rbacv1.RoleBinding{
			roleBinding("ns1", "w", "Role", "writer", user("alice")),
			roleBinding("ns2", "r", "ClusterRole", "reader", user("alice")),
			roleBinding("ns3", "gone", "Role", "missing", user("alice")),
			roleBinding("ns1", "sa", "Role", "writer", rbacv1.Subject{Kind: "ServiceAccount", Name: "bot"}),
		},
	}
	az := NewAuthorizer(p)
	alice := apiserver.User{User: "alice"}
	bot := apiserver.User{User: ServiceAccountUsername("ns1", "bot"), Groups: ServiceAccountGroups("ns1")}
	reader := apiserver.User{User: "rita", Groups: []string{"readers"}}
	a := func(u apiserver.User, verb, ns string) apiserver.Attributes {
		return apiserver.Attributes{User: u, Verb: verb, Resource: "pods", Namespace: ns}
	}
	for _, c := range []struct {
		a          apiserver.Attributes
		want       bool
		wantReason string
	}{
		{a(alice, "create", "ns1"), true, `RBAC: allowed by RoleBinding "w/ns1" of Role "writer" to User "alice"`},
		{a(alice, "create", "ns2"), false, ""},
		{a(alice, "list", "ns2"), true, `RBAC: allowed by RoleBinding "r/ns2" of ClusterRole "reader" to User "alice"`},
		{a(alice, "list", "ns1"), false, ""},
		{a(alice, "list", ""), false, ""},
		{a(alice, "create", "ns3"), false, `RBAC: role.rbac.authorization.k8s.io "missing" not found`},
		{a(bot, "create", "ns1"), true, `RBAC: allowed by RoleBinding "sa/ns1" of Role "writer" to ServiceAccount "bot/ns1"`},
		{a(reader, "list", "any"), true, `RBAC: allowed by ClusterRoleBinding "readers" of ClusterRole "reader" to Group "readers"`},
		{a(reader, "list", ""), true, `RBAC: allowed by ClusterRoleBinding "readers" of ClusterRole "reader" to Group "readers"`},
		{a(reader, "delete", "any"), false, ""},
	} {
		got, reason := az.Authorize(context.Background(), c.a)
		if got != c.want || reason != c.wantReason {
			t.Errorf("%s %s in %q: %v %q, want %v %q", c.a.User.User, c.a.Verb, c.a.Namespace, got, reason, c.want, c.wantReason)
		}
	}
	st := az.RulesFor(alice, "ns3")
	if !st.Incomplete || !strings.Contains(st.EvaluationError, "not found") {
		t.Errorf("rules of alice in ns3: %+v", st)
	}
}

// TestCovers ports cases of kube's TestCoversExactMatch and friends
// (component-helpers auth/rbac/validation).
func TestCovers(t *testing.T) {
	r := func(v, g, res, names []string) rbacv1.PolicyRule {
		return rbacv1.PolicyRule{Verbs: v, APIGroups: g, Resources: res, ResourceNames: names}
	}
	s := func(v ...string) []string { return v }
	tests := []struct {
		name           string
		owner, servant []rbacv1.PolicyRule
		want           bool
		missing        int
	}{
		{"exact", []rbacv1.PolicyRule{r(s("get"), s("g"), s("r"), nil)}, []rbacv1.PolicyRule{r(s("get"), s("g"), s("r"), nil)}, true, 0},
		{"star verb", []rbacv1.PolicyRule{r(s("*"), s("g"), s("r"), nil)}, []rbacv1.PolicyRule{r(s("get", "delete"), s("g"), s("r"), nil)}, true, 0},
		{"star group", []rbacv1.PolicyRule{r(s("get"), s("*"), s("r"), nil)}, []rbacv1.PolicyRule{r(s("get"), s("a", "b"), s("r"), nil)}, true, 0},
		{"star resource", []rbacv1.PolicyRule{r(s("get"), s("g"), s("*"), nil)}, []rbacv1.PolicyRule{r(s("get"), s("g"), s("a", "a/status"), nil)}, true, 0},
		{"star subresource", []rbacv1.PolicyRule{r(s("get"), s("g"), s("*/status"), nil)}, []rbacv1.PolicyRule{r(s("get"), s("g"), s("a/status"), nil)}, true, 0},
		{"subresource is not the resource", []rbacv1.PolicyRule{r(s("get"), s("g"), s("*/status"), nil)}, []rbacv1.PolicyRule{r(s("get"), s("g"), s("a"), nil)}, false, 1},
		{"missing verbs listed one by one", []rbacv1.PolicyRule{r(s("get"), s("g"), s("r"), nil)}, []rbacv1.PolicyRule{r(s("get", "list", "delete"), s("g"), s("r"), nil)}, false, 2},
		{"split across owner rules", []rbacv1.PolicyRule{r(s("get"), s("g"), s("r"), nil), r(s("list"), s("g"), s("r"), nil)}, []rbacv1.PolicyRule{r(s("get", "list"), s("g"), s("r"), nil)}, true, 0},
		{"names cover names", []rbacv1.PolicyRule{r(s("get"), s("g"), s("r"), s("a", "b"))}, []rbacv1.PolicyRule{r(s("get"), s("g"), s("r"), s("a"))}, true, 0},
		{"names do not cover all", []rbacv1.PolicyRule{r(s("get"), s("g"), s("r"), s("a"))}, []rbacv1.PolicyRule{r(s("get"), s("g"), s("r"), nil)}, false, 1},
		{"no names cover names", []rbacv1.PolicyRule{r(s("get"), s("g"), s("r"), nil)}, []rbacv1.PolicyRule{r(s("get"), s("g"), s("r"), s("x"))}, true, 0},
		{"urls", []rbacv1.PolicyRule{{Verbs: s("get"), NonResourceURLs: s("/apis/*")}}, []rbacv1.PolicyRule{{Verbs: s("get"), NonResourceURLs: s("/apis/apps", "/api")}}, false, 1},
		{"full authority", fullAuthority, []rbacv1.PolicyRule{r(s("escalate"), s("x"), s("y/z"), s("n")), {Verbs: s("post"), NonResourceURLs: s("/x")}}, true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, missing := Covers(tt.owner, tt.servant)
			if got != tt.want || len(missing) != tt.missing {
				t.Errorf("Covers = %v, missing %v; want %v with %d missing", got, missing, tt.want, tt.missing)
			}
		})
	}
}

func TestCompactString(t *testing.T) {
	missing := compact([]rbacv1.PolicyRule{
		{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"secrets"}},
		{Verbs: []string{"list"}, APIGroups: []string{""}, Resources: []string{"secrets"}},
		{Verbs: []string{"get"}, NonResourceURLs: []string{"/metrics"}},
	})
	var got []string
	for _, r := range missing {
		got = append(got, CompactString(r))
	}
	want := []string{`{APIGroups:[""], Resources:["secrets"], Verbs:["get" "list"]}`, `{NonResourceURLs:["/metrics"], Verbs:["get"]}`}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

// BenchmarkAuthorize is a decision with the bootstrap policy and 1,000
// Roles and RoleBindings besides the user's: spread over 1,000 namespaces
// (one each), or all in the request's namespace, where the decision visits
// every binding until the user's (bench:authz's case).
func BenchmarkAuthorize(b *testing.B) {
	for _, tt := range []struct {
		name   string
		spread bool
	}{{"namespaces=1000", true}, {"namespaces=1", false}} {
		b.Run(tt.name, func(b *testing.B) {
			p := bootstrapPolicy()
			for i := range 1001 {
				ns := "ns"
				if tt.spread {
					ns = fmt.Sprintf("ns%d", i)
				}
				name := fmt.Sprintf("pod-writer-%d", i)
				p.Roles = append(p.Roles, nsRole(ns, name, rule(verbs("get", "list", "create"), groups(""), "pods")))
				p.RoleBindings = append(p.RoleBindings, roleBinding(ns, name, "Role", name, user(fmt.Sprintf("user%d", i))))
			}
			ns := "ns"
			if tt.spread {
				ns = "ns1000"
			}
			az := NewAuthorizer(p)
			a := apiserver.Attributes{User: apiserver.User{User: "user1000", Groups: []string{apiserver.GroupAuthenticated}},
				Verb: "create", Resource: "pods", Namespace: ns}
			for b.Loop() {
				if ok, _ := az.Authorize(context.Background(), a); !ok {
					b.Fatal("denied")
				}
			}
		})
	}
}
