package schemas

import (
	"slices"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func rbacResource(t *testing.T, plural string) *Resource {
	t.Helper()
	res, ok := testRegistry().Lookup(rbacv1.GroupName, "v1", plural)
	if !ok {
		t.Fatalf("no resource %s", plural)
	}
	return res
}

func TestRBACDefaults(t *testing.T) {
	b := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "ns"},
		RoleRef: rbacv1.RoleRef{Kind: "Role", Name: "r"},
		Subjects: []rbacv1.Subject{{Kind: "User", Name: "alice"}, {Kind: "Group", Name: "devs"},
			{Kind: "ServiceAccount", Name: "bot"}}}
	rbacResource(t, "rolebindings").Default(b)
	if b.RoleRef.APIGroup != rbacv1.GroupName {
		t.Errorf("roleRef.apiGroup = %q", b.RoleRef.APIGroup)
	}
	var got []string
	for _, s := range b.Subjects {
		got = append(got, s.APIGroup)
	}
	if want := []string{rbacv1.GroupName, rbacv1.GroupName, ""}; !slices.Equal(got, want) {
		t.Errorf("subjects' apiGroups = %q, want %q", got, want)
	}
}

func TestRBACValidation(t *testing.T) {
	role := func(rules ...rbacv1.PolicyRule) *rbacv1.Role {
		return &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: "ns"}, Rules: rules}
	}
	cr := func(agg *rbacv1.AggregationRule, rules ...rbacv1.PolicyRule) *rbacv1.ClusterRole {
		return &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "system:r"}, Rules: rules, AggregationRule: agg}
	}
	rb := func(ref rbacv1.RoleRef, subjects ...rbacv1.Subject) *rbacv1.RoleBinding {
		return &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "ns"}, RoleRef: ref, Subjects: subjects}
	}
	crb := func(ref rbacv1.RoleRef, subjects ...rbacv1.Subject) *rbacv1.ClusterRoleBinding {
		return &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "b"}, RoleRef: ref, Subjects: subjects}
	}
	ref := func(kind string) rbacv1.RoleRef {
		return rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kind, Name: "r"}
	}
	pods := rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods"}}
	alice := rbacv1.Subject{Kind: "User", APIGroup: rbacv1.GroupName, Name: "alice"}
	tests := []struct {
		name   string
		plural string
		obj    Object
		want   []string
	}{
		{"role", "roles", role(pods), nil},
		{"rule without verbs", "roles", role(rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}}), []string{"FieldValueRequired rules[0].verbs"}},
		{"rule without groups and resources", "roles", role(rbacv1.PolicyRule{Verbs: []string{"get"}}),
			[]string{"FieldValueRequired rules[0].apiGroups", "FieldValueRequired rules[0].resources"}},
		{"urls in a namespaced role", "roles", role(rbacv1.PolicyRule{Verbs: []string{"get"}, NonResourceURLs: []string{"/x"}}),
			[]string{"FieldValueInvalid rules[0].nonResourceURLs"}},
		{"urls and resources", "clusterroles", cr(nil, rbacv1.PolicyRule{Verbs: []string{"get"}, NonResourceURLs: []string{"/x"}, Resources: []string{"pods"}}),
			[]string{"FieldValueInvalid rules[0].nonResourceURLs"}},
		{"cluster role with urls", "clusterroles", cr(nil, rbacv1.PolicyRule{Verbs: []string{"get"}, NonResourceURLs: []string{"/x"}}), nil},
		{"empty aggregation", "clusterroles", cr(&rbacv1.AggregationRule{}), []string{"FieldValueRequired aggregationRule.clusterRoleSelectors"}},
		{"bad selector", "clusterroles", cr(&rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{
			{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Bogus"}}}}}),
			[]string{"FieldValueInvalid aggregationRule.clusterRoleSelectors[0]", "FieldValueInvalid aggregationRule.clusterRoleSelectors[0].matchExpressions[0].operator"}},
		{"binding", "rolebindings", rb(ref("Role"), alice), nil},
		{"binding to a cluster role", "rolebindings", rb(ref("ClusterRole"), alice), nil},
		{"binding to a pod", "rolebindings", rb(ref("Pod"), alice), []string{"FieldValueNotSupported roleRef.kind"}},
		{"binding in another group", "rolebindings", rb(rbacv1.RoleRef{APIGroup: "x", Kind: "Role", Name: "r"}), []string{"FieldValueNotSupported roleRef.apiGroup"}},
		{"binding without a role name", "rolebindings", rb(rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role"}), []string{"FieldValueRequired roleRef.name"}},
		{"subject without a name", "rolebindings", rb(ref("Role"), rbacv1.Subject{Kind: "User", APIGroup: rbacv1.GroupName}), []string{"FieldValueRequired subjects[0].name"}},
		{"user in the core group", "rolebindings", rb(ref("Role"), rbacv1.Subject{Kind: "User", Name: "a"}), []string{"FieldValueNotSupported subjects[0].apiGroup"}},
		{"service account in a group", "rolebindings", rb(ref("Role"), rbacv1.Subject{Kind: "ServiceAccount", APIGroup: "x", Name: "a"}), []string{"FieldValueNotSupported subjects[0].apiGroup"}},
		{"service account bad name", "rolebindings", rb(ref("Role"), rbacv1.Subject{Kind: "ServiceAccount", Name: "A_b"}), []string{"FieldValueInvalid subjects[0].name"}},
		{"unknown subject kind", "rolebindings", rb(ref("Role"), rbacv1.Subject{Kind: "Robot", Name: "a"}), []string{"FieldValueNotSupported subjects[0].kind"}},
		{"cluster binding to a role", "clusterrolebindings", crb(ref("Role"), alice), []string{"FieldValueNotSupported roleRef.kind"}},
		{"cluster binding of a service account needs its namespace", "clusterrolebindings", crb(ref("ClusterRole"), rbacv1.Subject{Kind: "ServiceAccount", Name: "a"}),
			[]string{"FieldValueRequired subjects[0].namespace"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := errKeys(rbacResource(t, tt.plural).ValidateCreate(tt.obj))
			if !slices.Equal(got, sorted(tt.want)) {
				t.Errorf("errors = %q, want %q", got, sorted(tt.want))
			}
		})
	}
	t.Run("roleRef is immutable", func(t *testing.T) {
		old := rb(ref("Role"), alice)
		old.ResourceVersion = "1"
		upd := old.DeepCopy()
		upd.RoleRef.Name = "other"
		if got := errKeys(rbacResource(t, "rolebindings").ValidateUpdate(upd, old)); !slices.Equal(got, []string{"FieldValueInvalid roleRef"}) {
			t.Errorf("errors = %q", got)
		}
	})
}

func TestRBACTables(t *testing.T) {
	ts := metav1.NewTime(testNow.Add(-90 * 60e9))
	b := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "ns", CreationTimestamp: ts},
		RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "view"},
		Subjects: []rbacv1.Subject{{Kind: "User", Name: "alice"}, {Kind: "User", Name: "bob"}, {Kind: "Group", Name: "devs"},
			{Kind: "ServiceAccount", Namespace: "ns", Name: "bot"}}}
	tbl := rbacResource(t, "rolebindings").Table
	var names []string
	for _, c := range tbl.Columns() {
		names = append(names, c.Name)
	}
	if want := []string{"Name", "Role", "Age", "Users", "Groups", "ServiceAccounts"}; !slices.Equal(names, want) {
		t.Errorf("columns = %q", names)
	}
	if got, want := tbl.Row(b), []any{"b", "ClusterRole/view", "90m", "alice, bob", "devs", "ns:bot"}; !slices.Equal(got, want) {
		t.Errorf("row = %q, want %q", got, want)
	}
	r := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "view", CreationTimestamp: ts}}
	if got, want := rbacResource(t, "clusterroles").Table.Row(r), []any{"view", ts.UTC().Format("2006-01-02T15:04:05Z")}; !slices.Equal(got, want) {
		t.Errorf("role row = %q, want %q", got, want)
	}
}
