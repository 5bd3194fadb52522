package kubectltest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// policyYAML refuses Deployments of more than 5 replicas.
const policyYAML = `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: max-replicas
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - apiGroups: ["apps"]
      apiVersions: ["v1"]
      operations: ["CREATE", "UPDATE"]
      resources: ["deployments"]
  validations:
  - expression: "object.spec.replicas <= 5"
    message: "replicas must be no greater than 5"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: max-replicas
spec:
  policyName: max-replicas
  validationActions: [Deny]
`

// testAdmissionPolicy applies a ValidatingAdmissionPolicy and its binding
// with kubectl: kubectl lists them with kube's columns, and `kubectl
// create deploy --replicas=10` is refused with kube's message.
func testAdmissionPolicy(t *testing.T, c *cluster) {
	file := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(file, []byte(policyYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	c.OK(t, "apply", "-f", file)
	defer c.OK(t, "delete", "-f", file)
	out := c.OK(t, "get", "validatingadmissionpolicies")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 2 || strings.Join(strings.Fields(lines[0]), " ") != "NAME VALIDATIONS PARAMKIND AGE" ||
		!strings.HasPrefix(strings.Join(strings.Fields(lines[1]), " "), "max-replicas 1 <unset> ") {
		t.Errorf("kubectl get validatingadmissionpolicies:\n%s", out)
	}
	out = c.OK(t, "get", "validatingadmissionpolicybindings")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 2 || strings.Join(strings.Fields(lines[0]), " ") != "NAME POLICYNAME PARAMREF AGE" ||
		!strings.HasPrefix(strings.Join(strings.Fields(lines[1]), " "), "max-replicas max-replicas <unset> ") {
		t.Errorf("kubectl get validatingadmissionpolicybindings:\n%s", out)
	}
	const want = `error: failed to create deployment: deployments.apps "x" is invalid: : ValidatingAdmissionPolicy 'max-replicas' with binding 'max-replicas' denied request: replicas must be no greater than 5`
	// The policy takes effect when the apiserver's informers have it.
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := c.Run(t, "create", "deploy", "x", "--image=i", "--replicas=10")
		if r.Err != nil {
			if !strings.Contains(r.Stderr, "ValidatingAdmissionPolicy 'max-replicas' with binding 'max-replicas' denied request: replicas must be no greater than 5") {
				t.Errorf("refusal: %s\nwant %s", r, want)
			}
			break
		}
		c.OK(t, "delete", "deploy", "x")
		if time.Now().After(deadline) {
			t.Fatalf("the policy never took effect: %s", r)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if r := c.Run(t, "get", "deploy", "x"); r.Err == nil {
		t.Errorf("the refused deployment exists: %s", r)
	}
	c.OK(t, "create", "deploy", "x", "--image=i", "--replicas=3")
	c.OK(t, "delete", "deploy", "x")
	testPolicyTypeChecking(t, c)
}

// typoPolicyYAML names a Deployment field that does not exist.
const typoPolicyYAML = `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: replicaz
spec:
  matchConstraints:
    resourceRules:
    - apiGroups: ["apps"]
      apiVersions: ["v1"]
      operations: ["CREATE", "UPDATE"]
      resources: ["deployments"]
  validations:
  - expression: "object.spec.replicaz > 1"
`

// testPolicyTypeChecking: the controller manager type checks policies
// and `kubectl get validatingadmissionpolicy NAME -o yaml` shows kube's
// status: the correct max-replicas has an empty
// typeChecking, replicaz a warning naming the kind and the field.
func testPolicyTypeChecking(t *testing.T, c *cluster) {
	typo := filepath.Join(t.TempDir(), "typo.yaml")
	if err := os.WriteFile(typo, []byte(typoPolicyYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	c.OK(t, "apply", "-f", typo)
	defer c.OK(t, "delete", "-f", typo)
	// status of the policy once observed, as kubectl prints it.
	status := func(name string) string {
		deadline := time.Now().Add(30 * time.Second)
		for {
			out := c.OK(t, "get", "validatingadmissionpolicy", name, "-o", "yaml")
			if strings.Contains(out, "observedGeneration: 1") {
				_, st, _ := strings.Cut(out, "\nstatus:\n")
				return st
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s never type checked:\n%s", name, out)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	if got, want := status("max-replicas"), "  observedGeneration: 1\n  typeChecking: {}\n"; got != want {
		t.Errorf("max-replicas status:\n%s\nwant\n%s", got, want)
	}
	const want = `  observedGeneration: 1
  typeChecking:
    expressionWarnings:
    - fieldRef: spec.validations[0].expression
      warning: |
        apps/v1, Kind=Deployment: ERROR: <input>:1:12: undefined field 'replicaz'
         | object.spec.replicaz > 1
         | ...........^
`
	if got := status("replicaz"); got != want {
		t.Errorf("replicaz status:\n%s\nwant\n%s", got, want)
	}
}
