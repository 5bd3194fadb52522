package apitest

import (
	"slices"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cairn-dev/cairn/services/apiserver/rbac"
	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
)

// TestBootstrapReconcile: Reconcile, which the control plane runs at
// start, puts back what is missing of the bootstrap policy, keeps what was
// added, and leaves alone objects annotated autoupdate=false.
func TestBootstrapReconcile(t *testing.T) {
	env := controlplanetest.Start(t)
	ctx := ctxFor(t, 60*time.Second)
	roles, bindings := env.Client.RbacV1().ClusterRoles(), env.Client.RbacV1().ClusterRoleBindings()
	disc, err := roles.Get(ctx, "system:discovery", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	disc.Rules = []rbacv1.PolicyRule{{Verbs: []string{"get"}, NonResourceURLs: []string{"/custom"}}}
	if _, err := roles.Update(ctx, disc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	mon, err := roles.Get(ctx, "system:monitoring", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mon.Rules, mon.Annotations[rbac.AutoUpdateAnnotation] = nil, "false"
	if _, err := roles.Update(ctx, mon, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := bindings.Delete(ctx, "system:basic-user", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	admins, err := bindings.Get(ctx, "cluster-admin", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	extra := rbacv1.Subject{Kind: "User", APIGroup: rbacv1.GroupName, Name: "root"}
	admins.Subjects = []rbacv1.Subject{extra}
	if _, err := bindings.Update(ctx, admins, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	if err := rbac.Reconcile(ctx, env.Client); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	disc, _ = roles.Get(ctx, "system:discovery", metav1.GetOptions{})
	boot := rbac.BootstrapClusterRoles()
	want := boot[slices.IndexFunc(boot, func(r *rbacv1.ClusterRole) bool { return r.Name == "system:discovery" })]
	if ok, missing := rbac.Covers(disc.Rules, want.Rules); !ok || !slices.ContainsFunc(disc.Rules, func(r rbacv1.PolicyRule) bool {
		return slices.Contains(r.NonResourceURLs, "/custom")
	}) {
		t.Errorf("system:discovery after reconcile: %+v (missing %+v)", disc.Rules, missing)
	}
	if mon, _ = roles.Get(ctx, "system:monitoring", metav1.GetOptions{}); len(mon.Rules) != 0 {
		t.Errorf("system:monitoring (autoupdate=false) was changed: %+v", mon.Rules)
	}
	if b, err := bindings.Get(ctx, "system:basic-user", metav1.GetOptions{}); err != nil || len(b.Subjects) != 1 || b.Subjects[0].Name != "system:authenticated" {
		t.Errorf("system:basic-user after reconcile: %+v %v", b, err)
	}
	if b, _ := bindings.Get(ctx, "cluster-admin", metav1.GetOptions{}); !slices.Contains(b.Subjects, extra) ||
		!slices.ContainsFunc(b.Subjects, func(s rbacv1.Subject) bool { return s.Name == "system:masters" }) {
		t.Errorf("cluster-admin subjects after reconcile: %+v", b.Subjects)
	}
	// Nothing left to do: a second reconcile writes nothing.
	before := settle(t, env)
	if err := rbac.Reconcile(ctx, env.Client); err != nil {
		t.Fatal(err)
	}
	requireNothingWritten(t, env, before)
}

// TestClusterRoleAggregation: a ClusterRole labelled to aggregate to view
// lends its rules to view, and through view's own label to edit and admin;
// they lose them when it goes.
func TestClusterRoleAggregation(t *testing.T) {
	env := controlplanetest.Start(t)
	ctx := ctxFor(t, 60*time.Second)
	roles := env.Client.RbacV1().ClusterRoles()
	widgets := rbacv1.PolicyRule{Verbs: []string{"get", "list"}, APIGroups: []string{"example.com"}, Resources: []string{"widgets"}}
	if _, err := roles.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "widget-viewer",
		Labels: map[string]string{"rbac.authorization.k8s.io/aggregate-to-view": "true"}}, Rules: []rbacv1.PolicyRule{widgets}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	has := func(name string) bool {
		r, err := roles.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return slices.ContainsFunc(r.Rules, func(x rbacv1.PolicyRule) bool { return slices.Equal(x.Resources, widgets.Resources) })
	}
	eventually := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("never: %s", what)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	eventually("view, edit and admin get the widgets rule", func() bool { return has("view") && has("edit") && has("admin") })
	if err := roles.Delete(ctx, "widget-viewer", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually("view, edit and admin lose it", func() bool { return !has("view") && !has("edit") && !has("admin") })
}
