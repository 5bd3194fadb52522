package kubectltest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// testServerSideApply runs kubectl apply --server-side: create, an apply
// that drops a key it applied before, another field manager's conflicting
// apply refused and then forced, and the managed fields kubectl shows.
func testServerSideApply(t *testing.T, c *cluster) {
	dir := t.TempDir()
	write := func(name, data string) string {
		p := filepath.Join(dir, name)
		body := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ssa\ndata:\n" + data
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	v1 := write("v1.yaml", "  a: \"1\"\n  b: \"2\"\n")
	v2 := write("v2.yaml", "  a: \"1\"\n  c: \"3\"\n")
	other := write("other.yaml", "  a: \"9\"\n")

	for _, f := range []string{v1, v2} {
		if got := strings.TrimSpace(c.OK(t, "apply", "--server-side", "-f", f)); got != "configmap/ssa serverside-applied" {
			t.Errorf("apply --server-side -f %s = %q", filepath.Base(f), got)
		}
	}
	if got := c.OK(t, "get", "cm", "ssa", "-o", "jsonpath={.data}"); got != `{"a":"1","c":"3"}` {
		t.Errorf("data after the second apply = %s, want a and c (b dropped)", got)
	}
	stderr := c.Fails(t, "apply", "--server-side", "--field-manager=other", "-f", other)
	if !strings.Contains(stderr, "conflict") || !strings.Contains(stderr, `"kubectl"`) || !strings.Contains(stderr, ".data.a") {
		t.Errorf("conflicting apply: stderr %q, want a conflict with kubectl on .data.a", stderr)
	}
	c.OK(t, "apply", "--server-side", "--field-manager=other", "--force-conflicts", "-f", other)
	if got := c.OK(t, "get", "cm", "ssa", "-o", "jsonpath={.data.a}"); got != "9" {
		t.Errorf("data.a after the forced apply = %q, want 9", got)
	}
	managed := c.OK(t, "get", "cm", "ssa", "-o", "yaml", "--show-managed-fields")
	for _, want := range []string{"manager: other", "manager: kubectl", "operation: Apply"} {
		if !strings.Contains(managed, want) {
			t.Errorf("managed fields lack %q:\n%s", want, managed)
		}
	}
	c.OK(t, "delete", "cm", "ssa")
}
