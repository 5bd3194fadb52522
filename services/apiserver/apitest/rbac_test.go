package apitest

import (
	"net/http"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
)

// rbacEnv is a control plane with namespaces team and other, and clients
// for the admin and for alice (an ordinary user).
type rbacEnv struct {
	*controlplanetest.Env
	admin, alice kubernetes.Interface
}

func newRBACEnv(t *testing.T) *rbacEnv {
	env := controlplanetest.Start(t)
	e := &rbacEnv{Env: env, admin: env.Client, alice: kubernetes.NewForConfigOrDie(env.ConfigFor(controlplanetest.UserToken))}
	for _, ns := range []string{"team", "other"} {
		if _, err := env.Client.CoreV1().Namespaces().Create(ctxFor(t, 10*time.Second),
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// grant gives alice rules in namespace through a Role and RoleBinding
// named name, and waits until the authorizer knows (RBAC decides from a
// cache fed by the log, as kube's does from informers).
func (e *rbacEnv) grant(t *testing.T, namespace, name string, rules ...rbacv1.PolicyRule) {
	t.Helper()
	ctx := ctxFor(t, 30*time.Second)
	if _, err := e.admin.RbacV1().Roles(namespace).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.admin.RbacV1().RoleBindings(namespace).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{Kind: "Role", Name: name},
		Subjects: []rbacv1.Subject{{Kind: "User", Name: "alice"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	r := rules[0]
	e.waitAllowed(t, "alice", authorizationv1.ResourceAttributes{Namespace: namespace, Verb: r.Verbs[0], Group: r.APIGroups[0],
		Resource: r.Resources[0], Name: firstOr(r.ResourceNames)})
}

func firstOr(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

// waitAllowed polls SubjectAccessReview until user may do ra.
func (e *rbacEnv) waitAllowed(t *testing.T, user string, ra authorizationv1.ResourceAttributes) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if e.sar(t, user, ra).Allowed {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never allowed to %+v", user, ra)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (e *rbacEnv) sar(t *testing.T, user string, ra authorizationv1.ResourceAttributes) authorizationv1.SubjectAccessReviewStatus {
	t.Helper()
	r, err := e.admin.AuthorizationV1().SubjectAccessReviews().Create(ctxFor(t, 10*time.Second), &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{User: user, Groups: []string{"system:authenticated"}, ResourceAttributes: &ra}},
		metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("subject access review: %v", err)
	}
	return r.Status
}

func requireForbidden(t *testing.T, err error, msg string) {
	t.Helper()
	if !apierrors.IsForbidden(err) {
		t.Fatalf("want 403, got %v", err)
	}
	if !strings.Contains(err.Error(), msg) {
		t.Fatalf("403 %q does not say %q", err, msg)
	}
}

var (
	podRule    = rbacv1.PolicyRule{Verbs: []string{"get", "list", "create"}, APIGroups: []string{""}, Resources: []string{"pods"}}
	secretRule = rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"secrets"}}
	rbacWrites = rbacv1.PolicyRule{Verbs: []string{"create", "update"}, APIGroups: []string{rbacv1.GroupName}, Resources: []string{"roles", "rolebindings"}}
)

// TestRBACNamespaceRole: a user with a Role in one namespace does what it
// grants there, and gets kube's 403 elsewhere, with nothing written.
func TestRBACNamespaceRole(t *testing.T) {
	e := newRBACEnv(t)
	ctx := ctxFor(t, 60*time.Second)
	e.grant(t, "team", "pods", podRule)
	if _, err := e.alice.CoreV1().Pods("team").Create(ctx, labeledPod("mine", nil), metav1.CreateOptions{}); err != nil {
		t.Fatalf("alice creates a pod in team: %v", err)
	}
	if _, err := e.alice.CoreV1().Pods("team").List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatalf("alice lists pods in team: %v", err)
	}
	before := settle(t, e.Env)
	_, err := e.alice.CoreV1().Pods("other").Create(ctx, labeledPod("theirs", nil), metav1.CreateOptions{})
	requireForbidden(t, err, `pods is forbidden: User "alice" cannot create resource "pods" in API group "" in the namespace "other"`)
	_, err = e.alice.CoreV1().Secrets("team").Get(ctx, "x", metav1.GetOptions{})
	requireForbidden(t, err, `secrets "x" is forbidden: User "alice" cannot get resource "secrets" in API group "" in the namespace "team"`)
	_, err = e.alice.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	requireForbidden(t, err, `User "alice" cannot list resource "pods" in API group "" at the cluster scope`)
	requireNothingWritten(t, e.Env, before)

	// Deleting the binding takes the grant away.
	if err := e.admin.RbacV1().RoleBindings("team").Delete(ctx, "pods", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for e.sar(t, "alice", authorizationv1.ResourceAttributes{Namespace: "team", Verb: "list", Resource: "pods"}).Allowed {
		if time.Now().After(deadline) {
			t.Fatal("alice still lists pods after her binding is gone")
		}
		time.Sleep(20 * time.Millisecond)
	}
	_, err = e.alice.CoreV1().Pods("team").List(ctx, metav1.ListOptions{})
	requireForbidden(t, err, `User "alice" cannot list resource "pods" in API group "" in the namespace "team"`)
}

// TestRBACEscalation: roles that grant more than their author holds are
// refused unless the author may escalate; bindings need bind on the role
// or holding its rules.
func TestRBACEscalation(t *testing.T) {
	e := newRBACEnv(t)
	ctx := ctxFor(t, 90*time.Second)
	e.grant(t, "team", "writer", rbacWrites, podRule)
	roles := e.alice.RbacV1().Roles("team")
	if _, err := roles.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "held"}, Rules: []rbacv1.PolicyRule{podRule}},
		metav1.CreateOptions{}); err != nil {
		t.Fatalf("a role alice holds: %v", err)
	}
	before := settle(t, e.Env)
	_, err := roles.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "secrets"}, Rules: []rbacv1.PolicyRule{secretRule}},
		metav1.CreateOptions{})
	requireForbidden(t, err, `roles.rbac.authorization.k8s.io "secrets" is forbidden: user "alice" (groups=["system:authenticated"]) is attempting to grant RBAC permissions not currently held:
{APIGroups:[""], Resources:["secrets"], Verbs:["get"]}`)
	_, err = e.alice.RbacV1().RoleBindings("team").Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "edit"},
		RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "edit"}, Subjects: []rbacv1.Subject{{Kind: "User", Name: "bob"}}}, metav1.CreateOptions{})
	requireForbidden(t, err, `rolebindings.rbac.authorization.k8s.io "edit" is forbidden: user "alice" (groups=["system:authenticated"]) is attempting to grant RBAC permissions not currently held`)
	requireNothingWritten(t, e.Env, before)

	// A binding to a role whose rules alice holds needs nothing more.
	if _, err := e.alice.RbacV1().RoleBindings("team").Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "held"},
		RoleRef: rbacv1.RoleRef{Kind: "Role", Name: "held"}, Subjects: []rbacv1.Subject{{Kind: "User", Name: "bob"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("binding a held role: %v", err)
	}
	// bind on the edit ClusterRole lets alice bind it in team.
	e.grant(t, "team", "bind-edit", rbacv1.PolicyRule{Verbs: []string{"bind"}, APIGroups: []string{rbacv1.GroupName},
		Resources: []string{"clusterroles"}, ResourceNames: []string{"edit"}})
	if _, err := e.alice.RbacV1().RoleBindings("team").Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "edit"},
		RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "edit"}, Subjects: []rbacv1.Subject{{Kind: "User", Name: "bob"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("binding edit with the bind verb: %v", err)
	}
	// ... but not in another namespace, and not view.
	_, err = e.alice.RbacV1().RoleBindings("team").Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "view"},
		RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "view"}, Subjects: []rbacv1.Subject{{Kind: "User", Name: "bob"}}}, metav1.CreateOptions{})
	requireForbidden(t, err, "is attempting to grant RBAC permissions not currently held")
	// escalate lets alice write any role.
	e.grant(t, "team", "escalate", rbacv1.PolicyRule{Verbs: []string{"escalate"}, APIGroups: []string{rbacv1.GroupName}, Resources: []string{"roles"}})
	if _, err := roles.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "secrets"}, Rules: []rbacv1.PolicyRule{secretRule}},
		metav1.CreateOptions{}); err != nil {
		t.Fatalf("a role with escalate: %v", err)
	}
}

// TestSubjectAccessReview: SubjectAccessReview and
// LocalSubjectAccessReview answer for another user; bad specs are 422.
func TestSubjectAccessReview(t *testing.T) {
	e := newRBACEnv(t)
	ctx := ctxFor(t, 60*time.Second)
	e.grant(t, "team", "pods", podRule)
	before := settle(t, e.Env)
	st := e.sar(t, "alice", authorizationv1.ResourceAttributes{Namespace: "team", Verb: "create", Resource: "pods"})
	if !st.Allowed || st.Reason != `RBAC: allowed by RoleBinding "pods/team" of Role "pods" to User "alice"` {
		t.Errorf("alice create pods in team: %+v", st)
	}
	if st := e.sar(t, "alice", authorizationv1.ResourceAttributes{Namespace: "other", Verb: "create", Resource: "pods"}); st.Allowed {
		t.Errorf("alice create pods in other: %+v", st)
	}
	local, err := e.admin.AuthorizationV1().LocalSubjectAccessReviews("team").Create(ctx, &authorizationv1.LocalSubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{User: "alice", ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: "team", Verb: "list", Resource: "pods"}}}, metav1.CreateOptions{})
	if err != nil || !local.Status.Allowed {
		t.Errorf("local review: %+v %v", local, err)
	}
	_, err = e.admin.AuthorizationV1().LocalSubjectAccessReviews("team").Create(ctx, &authorizationv1.LocalSubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{User: "alice", ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: "other", Verb: "list", Resource: "pods"}}}, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.resourceAttributes.namespace: Invalid value: \"other\": must match metadata.namespace") {
		t.Errorf("local review of another namespace: %v", err)
	}
	_, err = e.admin.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "get", Resource: "pods"}}},
		metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "at least one of user or group must be specified") {
		t.Errorf("review without a user: %v", err)
	}
	// alice may not ask about others.
	_, err = e.alice.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{User: "bob", ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "get", Resource: "pods"}}},
		metav1.CreateOptions{})
	requireForbidden(t, err, `User "alice" cannot create resource "subjectaccessreviews" in API group "authorization.k8s.io" at the cluster scope`)
	requireNothingWritten(t, e.Env, before)
}

// TestImpersonation: Impersonate-* headers, authorized by the impersonate
// verb, as kubectl --as and --as-group send them.
func TestImpersonation(t *testing.T) {
	e := newRBACEnv(t)
	ctx := ctxFor(t, 60*time.Second)
	as := func(token, user string, groups ...string) kubernetes.Interface {
		c := e.ConfigFor(token)
		c.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups}
		return kubernetes.NewForConfigOrDie(c)
	}
	whoami := func(cs kubernetes.Interface) (authenticationv1.UserInfo, error) {
		r, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if err != nil {
			return authenticationv1.UserInfo{}, err
		}
		return r.Status.UserInfo, nil
	}
	before := settle(t, e.Env)
	// The admin acts as alice and gets alice's refusals.
	_, err := as(controlplanetest.AdminToken, "alice").CoreV1().Pods("other").Create(ctx, labeledPod("p", nil), metav1.CreateOptions{})
	requireForbidden(t, err, `User "alice" cannot create resource "pods" in API group "" in the namespace "other"`)
	u, err := whoami(as(controlplanetest.AdminToken, "alice", "devs"))
	if err != nil || u.Username != "alice" || strings.Join(u.Groups, ",") != "devs,system:authenticated" {
		t.Errorf("admin as alice in devs: %+v %v", u, err)
	}
	// A service account: its groups follow from its name, and a binding
	// naming it (ServiceAccount subject without a namespace: the
	// binding's) applies.
	sa := as(controlplanetest.AdminToken, "system:serviceaccount:team:bot")
	if u, err := whoami(sa); err != nil || u.Username != "system:serviceaccount:team:bot" ||
		strings.Join(u.Groups, ",") != "system:serviceaccounts,system:serviceaccounts:team,system:authenticated" {
		t.Errorf("admin as a service account: %+v %v", u, err)
	}
	_, err = sa.CoreV1().Pods("team").List(ctx, metav1.ListOptions{})
	requireForbidden(t, err, `User "system:serviceaccount:team:bot" cannot list resource "pods" in API group "" in the namespace "team"`)
	// alice may not impersonate.
	_, err = whoami(as(controlplanetest.UserToken, "bob"))
	requireForbidden(t, err, `users "bob" is forbidden: User "alice" cannot impersonate resource "users" in API group "" at the cluster scope`)
	r := do(t, e.Env, call{method: http.MethodGet, path: "/api/v1/namespaces/team/pods", header: http.Header{"Impersonate-Group": {"devs"}}})
	if r.code != http.StatusBadRequest {
		t.Errorf("group without user: %d %s", r.code, r.body)
	}
	requireNothingWritten(t, e.Env, before)

	// With impersonate on user bob (and not on group admins), alice is bob.
	if _, err := e.admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "impersonate-bob"},
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"impersonate"}, APIGroups: []string{""}, Resources: []string{"users"}, ResourceNames: []string{"bob"}}}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "alice-bob"},
		RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "impersonate-bob"}, Subjects: []rbacv1.Subject{{Kind: "User", Name: "alice"}}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitAllowed(t, "alice", authorizationv1.ResourceAttributes{Verb: "impersonate", Resource: "users", Name: "bob"})
	if u, err := whoami(as(controlplanetest.UserToken, "bob")); err != nil || u.Username != "bob" {
		t.Errorf("alice as bob: %+v %v", u, err)
	}
	_, err = whoami(as(controlplanetest.UserToken, "bob", "admins"))
	requireForbidden(t, err, `groups "admins" is forbidden: User "alice" cannot impersonate resource "groups" in API group "" at the cluster scope`)
	_, err = whoami(as(controlplanetest.UserToken, "carol"))
	requireForbidden(t, err, `users "carol" is forbidden`)

	if _, err := e.admin.RbacV1().RoleBindings("team").Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "bot-view"},
		RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "view"}, Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "bot"}}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitAllowed(t, "system:serviceaccount:team:bot", authorizationv1.ResourceAttributes{Namespace: "team", Verb: "list", Resource: "pods"})
	if _, err := sa.CoreV1().Pods("team").List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("the service account bound to view lists pods: %v", err)
	}
}
