package schemas

import (
	"crypto/x509/pkix"
	"strings"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/cairn-dev/cairn/services/pki/csrtest"
)

func testCSRObject(t *testing.T) *certificatesv1.CertificateSigningRequest {
	return &certificatesv1.CertificateSigningRequest{Spec: certificatesv1.CertificateSigningRequestSpec{
		Request:    csrtest.Request(t, pkix.Name{CommonName: "alice"}),
		SignerName: certificatesv1.KubeAPIServerClientSignerName,
		Usages:     []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth},
	}}
}

func TestValidateCSR(t *testing.T) {
	for _, tt := range []struct {
		name   string
		mutate func(c *certificatesv1.CertificateSigningRequest)
		want   string // a substring of the errors; empty: valid
	}{
		{"valid", func(*certificatesv1.CertificateSigningRequest) {}, ""},
		{"ten minutes", func(c *certificatesv1.CertificateSigningRequest) { c.Spec.ExpirationSeconds = ptr.To[int32](600) }, ""},
		{"not PEM", func(c *certificatesv1.CertificateSigningRequest) { c.Spec.Request = []byte("junk") }, "spec.request"},
		{"no usages", func(c *certificatesv1.CertificateSigningRequest) { c.Spec.Usages = nil }, "spec.usages: Required value"},
		{"unknown usage", func(c *certificatesv1.CertificateSigningRequest) { c.Spec.Usages = []certificatesv1.KeyUsage{"flying"} }, "spec.usages[0]: Unsupported value"},
		{"duplicate usage", func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Usages = append(c.Spec.Usages, certificatesv1.UsageClientAuth)
		}, "spec.usages[2]: Duplicate value"},
		{"no signer", func(c *certificatesv1.CertificateSigningRequest) { c.Spec.SignerName = "" }, "spec.signerName: Required value"},
		{"signer without path", func(c *certificatesv1.CertificateSigningRequest) { c.Spec.SignerName = "example.com" }, "example.com/signer-name"},
		{"signer one segment", func(c *certificatesv1.CertificateSigningRequest) { c.Spec.SignerName = "local/x" }, "at least two segments"},
		{"too short", func(c *certificatesv1.CertificateSigningRequest) { c.Spec.ExpirationSeconds = ptr.To[int32](599) }, "spec.expirationSeconds"},
		{"approved and denied", func(c *certificatesv1.CertificateSigningRequest) {
			c.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{
				{Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue},
				{Type: certificatesv1.CertificateDenied, Status: corev1.ConditionTrue}}
		}, "mutually exclusive"},
		{"approved false", func(c *certificatesv1.CertificateSigningRequest) {
			c.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{Type: certificatesv1.CertificateApproved, Status: corev1.ConditionFalse}}
		}, "status.conditions[0].status: Unsupported value"},
		{"bad certificate", func(c *certificatesv1.CertificateSigningRequest) { c.Status.Certificate = []byte("junk") }, "status.certificate"},
	} {
		c := testCSRObject(t)
		tt.mutate(c)
		errs := validateCSR(c)
		switch {
		case tt.want == "" && len(errs) > 0:
			t.Errorf("%s: %v, want valid", tt.name, errs)
		case tt.want != "" && !strings.Contains(errs.ToAggregate().Error(), tt.want):
			t.Errorf("%s: %v, want %q", tt.name, errs, tt.want)
		}
	}
}

func TestValidateCSRUpdate(t *testing.T) {
	old := testCSRObject(t)
	old.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue}}
	c := old.DeepCopy()
	c.Spec.SignerName = "example.com/other"
	if errs := validateCSRUpdate(c, old); !strings.Contains(errs.ToAggregate().Error(), "spec: Invalid value: \"<spec>\": field is immutable") {
		t.Errorf("spec change: %v", errs)
	}
	c = old.DeepCopy()
	c.Status.Conditions = nil
	if errs := validateCSRUpdate(c, old); !strings.Contains(errs.ToAggregate().Error(), `may not remove a condition of type "Approved"`) {
		t.Errorf("condition removed: %v", errs)
	}
	c = old.DeepCopy()
	c.Status.Conditions = append(c.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{Type: certificatesv1.CertificateFailed, Status: corev1.ConditionTrue})
	if errs := validateCSRUpdate(c, old); len(errs) > 0 {
		t.Errorf("adding Failed: %v", errs)
	}
	if got := CSRCondition(c); got != "Approved,Failed" {
		t.Errorf("CSRCondition = %q, want Approved,Failed", got)
	}
}
