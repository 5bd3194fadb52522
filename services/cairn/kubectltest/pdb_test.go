package kubectltest

import (
	"strings"
	"testing"
)

// invalidPDBYAML sets both budget fields, which kube refuses.
const invalidPDBYAML = `apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: both
spec:
  minAvailable: 1
  maxUnavailable: 1
  selector:
    matchLabels: {app: nothing}
`

// testPodDisruptionBudget creates, lists, patches and deletes a budget
// with kubectl. Its selector matches no pod, and it is gone at the end, so
// it leaves the drain that follows alone.
func testPodDisruptionBudget(t *testing.T, c *cluster) {
	got := strings.TrimSpace(c.OK(t, "create", "poddisruptionbudget", "guard", "--selector=app=nothing", "--min-available=2"))
	if got != "poddisruptionbudget.policy/guard created" {
		t.Errorf("create pdb = %q", got)
	}
	rows := wantHeader(t, c.OK(t, "get", "pdb"), "NAME", "MIN", "AVAILABLE", "MAX", "UNAVAILABLE", "ALLOWED", "DISRUPTIONS", "AGE")
	wantRow(t, rows, "guard", "2", "N/A")
	if got := c.OK(t, "get", "pdb", "guard", "-o", "jsonpath={.metadata.generation}"); got != "1" {
		t.Errorf("generation after create = %q, want 1", got)
	}

	c.OK(t, "patch", "pdb", "guard", "--type", "merge", "-p", `{"spec":{"minAvailable":null,"maxUnavailable":"50%"}}`)
	rows = wantHeader(t, c.OK(t, "get", "poddisruptionbudgets.policy", "guard"), "NAME", "MIN", "AVAILABLE", "MAX", "UNAVAILABLE", "ALLOWED", "DISRUPTIONS", "AGE")
	wantRow(t, rows, "guard", "N/A", "50%")
	if got := c.OK(t, "get", "pdb", "guard", "-o", "jsonpath={.metadata.generation}"); got != "2" {
		t.Errorf("generation after a spec patch = %q, want 2", got)
	}

	errs := []struct {
		name  string
		stdin string
		args  []string
		want  string
	}{
		{"over 100%", "", []string{"patch", "pdb", "guard", "--type", "merge", "-p", `{"spec":{"maxUnavailable":"150%"}}`},
			`The PodDisruptionBudget "guard" is invalid: spec.maxUnavailable: Invalid value: "150%": must not be greater than 100%`},
		{"both set", invalidPDBYAML, []string{"create", "-f", "-"},
			`The PodDisruptionBudget "both" is invalid: spec: Invalid value: `},
	}
	for _, tt := range errs {
		t.Run(tt.name, func(t *testing.T) {
			r := c.RunWith(t, tt.stdin, 0, tt.args...)
			if r.Err == nil || !strings.Contains(r.Stderr, tt.want) {
				t.Errorf("want an error containing %q; %s", tt.want, r)
			}
		})
	}
	if !strings.Contains(c.Fails(t, "get", "pdb", "both"), "NotFound") {
		t.Error("the refused budget was stored")
	}

	if got := strings.TrimSpace(c.OK(t, "delete", "pdb", "guard")); got != `poddisruptionbudget.policy "guard" deleted` {
		t.Errorf("delete pdb = %q", got)
	}
}
