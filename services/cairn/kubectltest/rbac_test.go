package kubectltest

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// reconcileYAML is what `kubectl auth reconcile -f` makes exist.
const reconcileYAML = `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: secret-reader
rules:
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["get", "list"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: secret-readers
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: secret-reader
subjects:
- kind: User
  name: erin
`

// testRBAC: kubectl create role and rolebinding, kubectl auth can-i --as,
// kubectl --as getting kube's 403, kubectl auth reconcile, and the get
// columns of the four kinds.
func testRBAC(t *testing.T, c *cluster) {
	c.OK(t, "create", "namespace", "rbac-team")
	if got := strings.TrimSpace(c.OK(t, "create", "role", "pod-reader", "--verb=get,list", "--resource=pods", "-n", "rbac-team")); got != "role.rbac.authorization.k8s.io/pod-reader created" {
		t.Errorf("create role = %q", got)
	}
	if got := strings.TrimSpace(c.OK(t, "create", "rolebinding", "read-pods", "--role=pod-reader", "--user=dana", "-n", "rbac-team")); got != "rolebinding.rbac.authorization.k8s.io/read-pods created" {
		t.Errorf("create rolebinding = %q", got)
	}
	rows := wantHeader(t, c.OK(t, "get", "roles", "-n", "rbac-team"), "NAME", "CREATED", "AT")
	wantRow(t, rows, "pod-reader")
	rows = wantHeader(t, c.OK(t, "get", "rolebindings", "-n", "rbac-team", "-o", "wide"), "NAME", "ROLE", "AGE", "USERS", "GROUPS", "SERVICEACCOUNTS")
	wantRow(t, rows, "read-pods", "Role/pod-reader")
	if !slices.ContainsFunc(rows, func(r []string) bool { return slices.Contains(r, "dana") }) {
		t.Errorf("rolebindings -o wide lacks user dana: %q", rows)
	}

	// The authorizer learns of the binding from the log; kube's e2e tests
	// wait for it the same way.
	canI := func(args ...string) string {
		return strings.TrimSpace(c.RunWith(t, "", 0, append([]string{"auth", "can-i"}, args...)...).Stdout)
	}
	deadline := time.Now().Add(20 * time.Second)
	for canI("list", "pods", "-n", "rbac-team", "--as", "dana") != "yes" {
		if time.Now().After(deadline) {
			t.Fatal("auth can-i list pods --as dana never said yes")
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, args := range [][]string{
		{"create", "pods", "-n", "rbac-team", "--as", "dana"},
		{"list", "pods", "-n", "default", "--as", "dana"},
		{"get", "secrets", "-n", "rbac-team", "--as", "dana"},
	} {
		if got := canI(args...); got != "no" {
			t.Errorf("auth can-i %q = %q, want no", args, got)
		}
	}
	if got := canI("list", "pods", "-n", "rbac-team", "--as", "dana", "--as-group", "devs"); got != "yes" {
		t.Errorf("auth can-i --as dana --as-group devs = %q, want yes", got)
	}
	// A ServiceAccount subject matches the service account's username, so
	// it works once service accounts have tokens.
	c.OK(t, "create", "rolebinding", "builder-view", "--clusterrole=view", "--serviceaccount=rbac-team:builder", "-n", "rbac-team")
	builder := "--as=system:serviceaccount:rbac-team:builder"
	deadline = time.Now().Add(20 * time.Second)
	for canI("list", "deployments.apps", "-n", "rbac-team", builder) != "yes" {
		if time.Now().After(deadline) {
			t.Fatal("auth can-i --as a service account never said yes")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := canI("list", "secrets", "-n", "rbac-team", builder); got != "no" {
		t.Errorf("auth can-i list secrets as the service account = %q, want no", got)
	}
	out := c.OK(t, "auth", "can-i", "--list", "-n", "rbac-team", "--as", "dana")
	if _, rows := table(t, out); !slices.ContainsFunc(rows, func(r []string) bool { return slices.Equal(r, []string{"pods", "[]", "[]", "[get", "list]"}) }) {
		t.Errorf("auth can-i --list --as dana:\n%s", out)
	}
	// kubectl says so on stderr.
	if r := c.RunWith(t, "", 0, "--as", "dana", "get", "pods", "-n", "rbac-team"); r.Err != nil ||
		strings.TrimSpace(r.Stderr) != "No resources found in rbac-team namespace." {
		t.Errorf("get pods --as dana: %s", r)
	}
	if got := c.Fails(t, "--as", "dana", "get", "pods", "-n", "default"); !strings.Contains(got,
		`Error from server (Forbidden): pods is forbidden: User "dana" cannot list resource "pods" in API group "" in the namespace "default"`) {
		t.Errorf("get pods --as dana in default: %q", got)
	}

	r := c.RunWith(t, reconcileYAML, 0, "auth", "reconcile", "-f", "-")
	if r.Err != nil || !strings.Contains(r.Stdout, "clusterrole.rbac.authorization.k8s.io/secret-reader reconciled") ||
		!strings.Contains(r.Stdout, "clusterrolebinding.rbac.authorization.k8s.io/secret-readers reconciled") {
		t.Errorf("auth reconcile: %s", r)
	}
	if r := c.RunWith(t, reconcileYAML, 0, "auth", "reconcile", "-f", "-"); r.Err != nil {
		t.Errorf("auth reconcile again: %s", r)
	}
	rows = wantHeader(t, c.OK(t, "get", "clusterroles"), "NAME", "CREATED", "AT")
	for _, name := range []string{"cluster-admin", "admin", "edit", "view", "system:kube-scheduler", "system:node", "secret-reader"} {
		wantRow(t, rows, name)
	}
	rows = wantHeader(t, c.OK(t, "get", "clusterrolebindings"), "NAME", "ROLE", "AGE")
	wantRow(t, rows, "cluster-admin", "ClusterRole/cluster-admin")
	wantRow(t, rows, "secret-readers", "ClusterRole/secret-reader")
	// admin, edit and view are aggregated.
	if got := c.OK(t, "get", "clusterrole", "view", "-o", "jsonpath={.rules[*].resources}"); !strings.Contains(got, "deployments") {
		t.Errorf("view's rules = %q", got)
	}
}
