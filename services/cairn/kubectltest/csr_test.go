package kubectltest

import (
	"crypto/x509/pkix"
	"encoding/base64"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/services/cairn/cairntest"
	"github.com/cairn-dev/cairn/services/pki/csrtest"
)

// TestKubectlCSR drives CertificateSigningRequests with kubectl: create,
// `kubectl get csr` (kube's columns), `kubectl certificate approve` (the
// controller-manager's csrsigning issues a certificate from the cluster CA
// for the requested duration), `kubectl certificate deny`, and a CSR kube's
// validation refuses.
func TestKubectlCSR(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cairn and runs cairn up; skipped with -short")
	}
	kubectl := cairntest.KubectlPath(t)
	bin := cairntest.Build(t)
	dir := t.TempDir()
	c := startCluster(t, t, bin, kubectl, filepath.Join(dir, "data"), cairntest.FreeAddr(t), filepath.Join(dir, "home"))

	me := strings.TrimSpace(c.OK(t, "auth", "whoami", "-o", "jsonpath={.status.userInfo.username}"))
	for _, name := range []string{"alice", "bob"} {
		c.RunWith(t, csrYAML(t, name, "kubernetes.io/kube-apiserver-client", 3600), callTimeout, "create", "-f", "-")
	}
	rows := wantHeader(t, c.OK(t, "get", "csr"), "NAME", "AGE", "SIGNERNAME", "REQUESTOR", "REQUESTEDDURATION", "CONDITION")
	wantRow(t, rows, "alice")
	for _, r := range rows {
		if len(r) != 6 || r[2] != "kubernetes.io/kube-apiserver-client" || r[3] != me || r[4] != "60m" || r[5] != "Pending" {
			t.Errorf("csr row %q, want signer, requestor %s, 60m, Pending", r, me)
		}
	}

	if got := strings.TrimSpace(c.OK(t, "certificate", "approve", "alice")); got != "certificatesigningrequest.certificates.k8s.io/alice approved" {
		t.Errorf("certificate approve = %q", got)
	}
	if got := strings.TrimSpace(c.OK(t, "certificate", "deny", "bob")); got != "certificatesigningrequest.certificates.k8s.io/bob denied" {
		t.Errorf("certificate deny = %q", got)
	}
	var certB64 string
	deadline := time.Now().Add(60 * time.Second)
	for certB64 == "" {
		certB64 = c.OK(t, "get", "csr", "alice", "-o", "jsonpath={.status.certificate}")
		if certB64 == "" && time.Now().After(deadline) {
			t.Fatalf("alice's approved CSR not issued after 60s:\n%s", c.OK(t, "get", "csr", "alice", "-o", "yaml"))
		}
		time.Sleep(200 * time.Millisecond)
	}
	rows = wantHeader(t, c.OK(t, "get", "csr"), "NAME", "AGE", "SIGNERNAME", "REQUESTOR", "REQUESTEDDURATION", "CONDITION")
	wantRow(t, rows, "alice")
	for _, r := range rows {
		want := map[string]string{"alice": "Approved,Issued", "bob": "Denied"}[r[0]]
		if r[len(r)-1] != want {
			t.Errorf("csr %s condition %q, want %q", r[0], r[len(r)-1], want)
		}
	}
	der, err := base64.StdEncoding.DecodeString(certB64)
	if err != nil {
		t.Fatal(err)
	}
	cert := csrtest.ParseCert(t, der)
	if cert.Subject.CommonName != "alice" {
		t.Errorf("issued subject %v", cert.Subject)
	}
	if life := cert.NotAfter.Sub(cert.NotBefore); life > time.Hour+10*time.Minute || life < time.Hour {
		t.Errorf("issued for %v, want about the requested 1h (plus kube's 5m backdate)", life)
	}
	// Denied stays denied: approving bob now is refused by validation.
	if r := c.Run(t, "certificate", "approve", "bob"); r.Err == nil {
		t.Errorf("approving a denied CSR succeeded: %s", r)
	}

	bad := c.RunWith(t, csrYAML(t, "carol", "example.com/unknown-signer", 300), callTimeout, "create", "-f", "-")
	if bad.Err == nil || !strings.Contains(bad.Stderr, `The CertificateSigningRequest "carol" is invalid`) ||
		!strings.Contains(bad.Stderr, "spec.expirationSeconds") {
		t.Errorf("create an invalid CSR: %s", bad)
	}
	if r := c.Run(t, "get", "csr", "carol"); r.Err == nil {
		t.Errorf("the invalid CSR was written: %s", r)
	}
	c.stop(t)
}

// csrYAML is a CSR for a client certificate of user name to signer.
func csrYAML(t *testing.T, name, signer string, seconds int) string {
	t.Helper()
	req := base64.StdEncoding.EncodeToString(csrtest.Request(t, pkix.Name{CommonName: name}))
	return fmt.Sprintf(`apiVersion: certificates.k8s.io/v1
kind: CertificateSigningRequest
metadata:
  name: %s
spec:
  request: %s
  signerName: %s
  expirationSeconds: %d
  usages: [digital signature, client auth]
`, name, req, signer, seconds)
}
