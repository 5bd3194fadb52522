package kubectltest

import (
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
)

// webhookYAML registers the test's webhook for pod creates in namespace
// default; %s are its URL and caBundle.
const webhookYAML = `apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata:
  name: kubectl-test
webhooks:
- name: label.kubectl.cairn.test
  clientConfig:
    url: %s
    caBundle: %s
  rules:
  - operations: ["CREATE"]
    apiGroups: [""]
    apiVersions: ["v1"]
    resources: ["pods"]
  objectSelector:
    matchLabels:
      webhook-test: "yes"
  sideEffects: None
  admissionReviewVersions: ["v1"]
`

// testWebhooks registers a real HTTPS webhook (on loopback) with kubectl
// apply: kubectl lists it as kube does, prints the warning the webhook
// sends, and the created pod carries the webhook's patch.
func testWebhooks(t *testing.T, c *cluster) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var review admissionv1.AdmissionReview
		b, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(b, &review); err != nil || review.Request == nil {
			http.Error(w, "bad review", http.StatusBadRequest)
			return
		}
		pt := admissionv1.PatchTypeJSONPatch
		review.Response = &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true, PatchType: &pt,
			Patch:    []byte(`[{"op":"add","path":"/metadata/annotations","value":{"patched-by":"kubectl-test"}}]`),
			Warnings: []string{"patched by the kubectl test webhook"}}
		review.Request = nil
		_ = json.NewEncoder(w).Encode(&review)
	}))
	defer srv.Close()
	ca := base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}))
	file := filepath.Join(t.TempDir(), "webhook.yaml")
	if err := os.WriteFile(file, fmt.Appendf(nil, webhookYAML, srv.URL+"/mutate", ca), 0o644); err != nil {
		t.Fatal(err)
	}
	c.OK(t, "apply", "-f", file)
	defer c.OK(t, "delete", "-f", file)
	out := c.OK(t, "get", "mutatingwebhookconfigurations")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 2 || strings.Join(strings.Fields(lines[0]), " ") != "NAME WEBHOOKS AGE" ||
		!strings.HasPrefix(strings.Join(strings.Fields(lines[1]), " "), "kubectl-test 1 ") {
		t.Errorf("kubectl get mutatingwebhookconfigurations:\n%s", out)
	}
	// The configuration takes effect when the apiserver's cache has it.
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := c.Run(t, "run", "webhooked", "--image=cairn.local/busybox:1.36", "--labels=webhook-test=yes", "--restart=Never",
			"--dry-run=server", "-o", "jsonpath={.metadata.annotations.patched-by}")
		if r.Err == nil && r.Stdout == "kubectl-test" {
			if !strings.Contains(r.Stderr, "Warning: patched by the kubectl test webhook") {
				t.Errorf("kubectl printed no warning: %s", r)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the webhook never patched: %s", r)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
