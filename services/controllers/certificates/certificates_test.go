package certificates

import (
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/cairn-dev/cairn/events/consumer/consumertest"
	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
	"github.com/cairn-dev/cairn/services/pki"
	"github.com/cairn-dev/cairn/services/pki/csrtest"
	"github.com/cairn-dev/cairn/services/pki/jointoken"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newCSR(t *testing.T, name string, subject pkix.Name, signer string, seconds int32) *certificatesv1.CertificateSigningRequest {
	c := &certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:    csrtest.Request(t, subject),
			SignerName: signer,
			Usages:     []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth},
		}}
	if seconds > 0 {
		c.Spec.ExpirationSeconds = ptr.To(seconds)
	}
	return c
}

func has(c *certificatesv1.CertificateSigningRequest, typ certificatesv1.RequestConditionType) bool {
	for _, cond := range c.Status.Conditions {
		if cond.Type == typ && cond.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// TestApproveAndSign: csrapproving approves a bootstrapper's request for a
// node client certificate (and nothing else a bootstrapper asks for),
// csrsigning signs approved requests of its signers with the cluster CA
// for the requested duration, and leaves other signers' alone.
func TestApproveAndSign(t *testing.T) {
	env := controlplanetest.Start(t, controlplanetest.Options{TLS: true})
	pkiDir := filepath.Join(env.Dir, "pki")
	m := consumertest.Manager(t, env, controlplanetest.ControllerToken, controlplanetest.Logger("CSR_TEST_LOG"), nil)
	if _, err := NewApprover(m); err != nil {
		t.Fatal(err)
	}
	if _, err := NewSigner(m, SignerOptions{CADir: pkiDir}); err != nil {
		t.Fatal(err)
	}
	controlplanetest.RunSynced(t, m)
	ctx := context.Background()

	ca, err := pki.LoadCA(pkiDir)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jointoken.New(ca.CACert)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.Client.CoreV1().Secrets(jointoken.Namespace).Create(ctx, tok.BootstrapSecret("test", time.Hour), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	boot := kubernetes.NewForConfigOrDie(env.ConfigFor(tok.Bootstrap())).CertificatesV1().CertificateSigningRequests()
	admin := env.Client.CertificatesV1().CertificateSigningRequests()

	// Not for a bootstrapper to get approved: a node identity without
	// its group, and a client certificate for a user.
	for _, c := range []*certificatesv1.CertificateSigningRequest{
		newCSR(t, "no-group", pkix.Name{CommonName: "system:node:n2"}, certificatesv1.KubeAPIServerClientKubeletSignerName, 0),
		newCSR(t, "user", pkix.Name{CommonName: "alice"}, certificatesv1.KubeAPIServerClientSignerName, 0),
	} {
		if _, err := boot.Create(ctx, c, metav1.CreateOptions{}); err != nil {
			t.Fatalf("bootstrapper creates %s: %v", c.Name, err)
		}
	}
	node := newCSR(t, "node", pkix.Name{CommonName: "system:node:n1", Organization: []string{"system:nodes"}},
		certificatesv1.KubeAPIServerClientKubeletSignerName, 3600)
	if _, err := boot.Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Another signer's request, approved by the admin: csrsigning leaves it.
	foreign := newCSR(t, "foreign", pkix.Name{CommonName: "bob"}, "example.com/signer", 0)
	if _, err := admin.Create(ctx, foreign, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	approve(t, admin, "foreign")

	got := waitIssued(t, admin, "node")
	if got.Spec.Username != jointoken.UserPrefix+tok.ID || !has(got, certificatesv1.CertificateApproved) {
		t.Errorf("node CSR: requestor %q, conditions %+v", got.Spec.Username, got.Status.Conditions)
	}
	cert := csrtest.ParseCert(t, got.Status.Certificate)
	if cert.Subject.CommonName != "system:node:n1" || cert.CheckSignatureFrom(ca.CACert) != nil {
		t.Errorf("node certificate %v not signed by the cluster CA for the node", cert.Subject)
	}
	if life := cert.NotAfter.Sub(cert.NotBefore); life < time.Hour || life > time.Hour+10*time.Minute {
		t.Errorf("node certificate lives %v, want the requested 1h (plus the backdate)", life)
	}
	if !slices.Contains(cert.ExtKeyUsage, x509.ExtKeyUsageClientAuth) {
		t.Errorf("node certificate usages %v", cert.ExtKeyUsage)
	}

	// The user request, approved by the admin, is signed too.
	approve(t, admin, "user")
	waitIssued(t, admin, "user")

	for _, name := range []string{"no-group", "foreign"} {
		c, err := admin.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if name == "no-group" && len(c.Status.Conditions) > 0 {
			t.Errorf("%s: conditions %+v, want none (not approved)", name, c.Status.Conditions)
		}
		if len(c.Status.Certificate) > 0 {
			t.Errorf("%s: issued", name)
		}
	}
}

// TestCSRAdmission: kube's CertificateApproval (approving needs "approve"
// on the signer, not only the approval subresource) and
// CertificateSubjectRestriction (no system:masters from
// kube-apiserver-client).
func TestCSRAdmission(t *testing.T) {
	env := controlplanetest.Start(t)
	ctx := context.Background()
	admin := env.Client.CertificatesV1().CertificateSigningRequests()
	masters := newCSR(t, "masters", pkix.Name{CommonName: "eve", Organization: []string{"system:masters"}}, certificatesv1.KubeAPIServerClientSignerName, 0)
	if _, err := admin.Create(ctx, masters, metav1.CreateOptions{}); !apierrors.IsForbidden(err) ||
		!strings.Contains(err.Error(), "with system:masters group is not allowed") {
		t.Errorf("create a system:masters CSR: %v, want 403", err)
	}
	if _, err := admin.Create(ctx, newCSR(t, "c", pkix.Name{CommonName: "carol"}, certificatesv1.KubeAPIServerClientSignerName, 0), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "csr-approval-only"}, Rules: []rbacv1.PolicyRule{
		{Verbs: []string{"get", "update"}, APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"certificatesigningrequests", "certificatesigningrequests/approval"}}}}
	if _, err := env.Client.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "csr-approval-only"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "alice"}}}
	if _, err := env.Client.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	alice := kubernetes.NewForConfigOrDie(env.ConfigFor(controlplanetest.UserToken)).CertificatesV1().CertificateSigningRequests()
	var err error
	deadline := time.Now().Add(30 * time.Second)
	for {
		var c *certificatesv1.CertificateSigningRequest
		if c, err = alice.Get(ctx, "c", metav1.GetOptions{}); err == nil {
			c.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue}}
			_, err = alice.UpdateApproval(ctx, "c", c, metav1.UpdateOptions{})
		}
		if err != nil && strings.Contains(err.Error(), "user not permitted to approve requests with signerName") || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond) // the binding reaches the authorizer from the log
	}
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `user not permitted to approve requests with signerName "kubernetes.io/kube-apiserver-client"`) {
		t.Errorf("approve without the signer's approve verb: %v, want 403 from CertificateApproval", err)
	}
	if c, _ := admin.Get(ctx, "c", metav1.GetOptions{}); c == nil || len(c.Status.Conditions) > 0 {
		t.Errorf("CSR c after the refused approval: %+v", c)
	}
}

func approve(t *testing.T, csrs interface {
	Get(context.Context, string, metav1.GetOptions) (*certificatesv1.CertificateSigningRequest, error)
	UpdateApproval(context.Context, string, *certificatesv1.CertificateSigningRequest, metav1.UpdateOptions) (*certificatesv1.CertificateSigningRequest, error)
}, name string) {
	t.Helper()
	ctx := context.Background()
	c, err := csrs.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c.Status.Conditions = append(c.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "Test"})
	if _, err := csrs.UpdateApproval(ctx, name, c, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("approve %s: %v", name, err)
	}
}

func waitIssued(t *testing.T, csrs interface {
	Get(context.Context, string, metav1.GetOptions) (*certificatesv1.CertificateSigningRequest, error)
}, name string) *certificatesv1.CertificateSigningRequest {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := csrs.Get(context.Background(), name, metav1.GetOptions{})
		if err == nil && len(c.Status.Certificate) > 0 {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("CSR %s not issued after 30s: %v %+v", name, err, c)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestSigningDuration is kube's signingDuration and its
// PermissiveSigningPolicy's end of validity.
func TestSigningDuration(t *testing.T) {
	sec := func(s int32) *int32 { return &s }
	for _, c := range []struct {
		name     string
		signing  time.Duration
		asked    *int32
		want     time.Duration
		validFor time.Duration
	}{
		{"default", DefaultDuration, nil, DefaultDuration, DefaultDuration - backdate},
		{"asked less", DefaultDuration, sec(3600), time.Hour, time.Hour},
		{"asked more", 2 * time.Hour, sec(24 * 3600), 2 * time.Hour, 2 * time.Hour},
		{"asked under the minimum", DefaultDuration, sec(60), minDuration, minDuration},
		{"the minimum over a shorter signing duration", time.Minute, sec(60), minDuration, minDuration},
		{"short signing duration", time.Minute, nil, time.Minute, time.Minute},
		{"long request", DefaultDuration, sec(10 * 3600), 10 * time.Hour, 10*time.Hour - backdate},
	} {
		s := &Signer{duration: c.signing}
		csr := &certificatesv1.CertificateSigningRequest{Spec: certificatesv1.CertificateSigningRequestSpec{ExpirationSeconds: c.asked}}
		got := s.durationOf(csr)
		if got != c.want || validity(got) != c.validFor {
			t.Errorf("%s: duration %v valid for %v after now, want %v and %v", c.name, got, validity(got), c.want, c.validFor)
		}
	}
}
