package certificates

import (
	"context"
	"crypto/x509"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cairn-dev/cairn/events/consumer"
	"github.com/cairn-dev/cairn/schemas"
	"github.com/cairn-dev/cairn/services/pki"
)

// SignerName is the signer's name in logs and metrics.
const SignerName = "csrsigning"

// DefaultDuration is kube-controller-manager's --cluster-signing-duration
// (one year); minDuration is the shortest certificate kube signs.
const (
	DefaultDuration = 365 * 24 * time.Hour
	minDuration     = 10 * time.Minute
	// backdate tolerates clocks a little behind the signer's (kube's 5m);
	// certificates shorter than short keep their full duration after now.
	backdate = 5 * time.Minute
	short    = 8 * time.Hour
)

// signers are the built-in signers cairn serves, with each one's check of
// what it may sign.
var signers = map[string]func(*x509.CertificateRequest, []certificatesv1.KeyUsage) error{
	certificatesv1.KubeAPIServerClientKubeletSignerName: validateKubeletClient,
	certificatesv1.KubeAPIServerClientSignerName:        validateClient,
	certificatesv1.KubeletServingSignerName:             validateKubeletServing,
}

// SignerOptions configure the signer.
type SignerOptions struct {
	// CADir holds the cluster CA (ca.crt and ca.key, see package pki):
	// kube's --cluster-signing-cert-file and --cluster-signing-key-file.
	CADir string
	// Duration is the longest certificate signed; 0 means DefaultDuration.
	Duration time.Duration
}

// Signer is the CSR signer. Build it with NewSigner; its Manager runs it.
type Signer struct {
	log      *slog.Logger
	client   kubernetes.Interface
	csrs     *consumer.Cache[*certificatesv1.CertificateSigningRequest]
	ca       *pki.PKI
	duration time.Duration
}

// NewSigner builds the signer on m with the CA of opts.CADir.
func NewSigner(m *consumer.Manager, opts SignerOptions) (*Signer, error) {
	ca, err := pki.LoadCA(opts.CADir)
	if err != nil {
		return nil, fmt.Errorf("certificates: signer: cluster CA in %s: %w", filepath.Clean(opts.CADir), err)
	}
	if opts.Duration <= 0 {
		opts.Duration = DefaultDuration
	}
	csrs, err := consumer.CacheFor[*certificatesv1.CertificateSigningRequest](m, csrResource)
	if err != nil {
		return nil, fmt.Errorf("certificates: signer: %w", err)
	}
	s := &Signer{log: m.Log().With("controller", SignerName), client: m.Client(), csrs: csrs, ca: ca, duration: opts.Duration}
	ctrl, err := m.NewController(consumer.ControllerConfig{Name: SignerName, Reconciler: s, Workers: 2,
		WaitFor: []consumer.Syncer{csrs}})
	if err != nil {
		return nil, fmt.Errorf("certificates: signer: %w", err)
	}
	consumer.For(csrs, ctrl, func(c *certificatesv1.CertificateSigningRequest) []string {
		if !s.wants(c) {
			return nil
		}
		return []string{consumer.KeyOf(c)}
	})
	return s, nil
}

// wants: approved, not failed, not issued, of a signer of ours.
func (s *Signer) wants(c *certificatesv1.CertificateSigningRequest) bool {
	_, ours := signers[c.Spec.SignerName]
	return ours && isApproved(c) && !hasCondition(c, certificatesv1.CertificateFailed) && len(c.Status.Certificate) == 0
}

var _ consumer.Reconciler = (*Signer)(nil)

// Reconcile signs the request req.Key, or marks it Failed when its
// signer's rules refuse it (kube's handle).
func (s *Signer) Reconcile(ctx context.Context, req consumer.Request) (consumer.Result, error) {
	_, name := req.NamespaceName()
	csr, ok := s.csrs.Get("", name)
	if !ok || !s.wants(csr) {
		return consumer.Result{}, nil
	}
	x509cr, err := schemas.ParseCSR(csr.Spec.Request)
	if err != nil {
		return consumer.Result{}, s.fail(ctx, csr, fmt.Sprintf("unable to parse csr: %v", err))
	}
	if err := signers[csr.Spec.SignerName](x509cr, csr.Spec.Usages); err != nil {
		return consumer.Result{}, s.fail(ctx, csr, err.Error())
	}
	tmpl, err := template(x509cr, csr.Spec.Usages)
	if err != nil {
		return consumer.Result{}, s.fail(ctx, csr, err.Error())
	}
	certPEM, err := s.ca.SignRequest(tmpl, x509cr.PublicKey, backdate, validity(s.durationOf(csr)))
	if err != nil {
		return consumer.Result{}, fmt.Errorf("certificates: sign csr %s: %w", name, err)
	}
	c := csr.DeepCopy()
	c.Status.Certificate = certPEM
	if _, err := s.client.CertificatesV1().CertificateSigningRequests().UpdateStatus(ctx, c, metav1.UpdateOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			return consumer.Result{}, nil
		}
		return consumer.Result{}, fmt.Errorf("certificates: csr %s: write certificate: %w", name, err)
	}
	s.log.Info("signed CSR", "csr", name, "signer", csr.Spec.SignerName, "subject", x509cr.Subject.String())
	return consumer.Result{}, nil
}

// durationOf is kube's signingDuration: the signing duration, or
// spec.expirationSeconds when that is shorter, but never under 10
// minutes.
func (s *Signer) durationOf(c *certificatesv1.CertificateSigningRequest) time.Duration {
	e := c.Spec.ExpirationSeconds
	if e == nil {
		return s.duration
	}
	switch d := time.Duration(*e) * time.Second; {
	case d > s.duration:
		return s.duration
	case d < minDuration:
		return minDuration
	default:
		return d
	}
}

// validity is how long past now a certificate of duration d stays valid,
// as kube's PermissiveSigningPolicy has it: every certificate is valid
// from backdate before now, and one that is not short-lived gives that
// back at its end, so that its whole lifetime is d.
func validity(d time.Duration) time.Duration {
	if d < short {
		return d
	}
	return d - backdate
}

func (s *Signer) fail(ctx context.Context, csr *certificatesv1.CertificateSigningRequest, message string) error {
	c := csr.DeepCopy()
	now := metav1.Now()
	c.Status.Conditions = append(c.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: certificatesv1.CertificateFailed, Status: corev1.ConditionTrue, Reason: "SignerValidationFailure", Message: message,
		LastUpdateTime: now, LastTransitionTime: now,
	})
	_, err := s.client.CertificatesV1().CertificateSigningRequests().UpdateStatus(ctx, c, metav1.UpdateOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("certificates: csr %s: mark failed: %w", c.Name, err)
	}
	s.log.Info("refused CSR", "csr", c.Name, "signer", c.Spec.SignerName, "reason", message)
	return nil
}

// template is the certificate of a request: its subject and names, the
// usages asked for (kube's certificate.KeyUsagesFromStrings).
func template(req *x509.CertificateRequest, usages []certificatesv1.KeyUsage) (*x509.Certificate, error) {
	t := &x509.Certificate{Subject: req.Subject, DNSNames: req.DNSNames, IPAddresses: req.IPAddresses,
		EmailAddresses: req.EmailAddresses, URIs: req.URIs}
	for _, u := range usages {
		if k, ok := keyUsages[u]; ok {
			t.KeyUsage |= k
		} else if e, ok := extKeyUsages[u]; ok {
			t.ExtKeyUsage = append(t.ExtKeyUsage, e)
		} else {
			return nil, fmt.Errorf("unrecognized usage %q", u)
		}
	}
	return t, nil
}

var keyUsages = map[certificatesv1.KeyUsage]x509.KeyUsage{
	certificatesv1.UsageSigning:           x509.KeyUsageDigitalSignature,
	certificatesv1.UsageDigitalSignature:  x509.KeyUsageDigitalSignature,
	certificatesv1.UsageContentCommitment: x509.KeyUsageContentCommitment,
	certificatesv1.UsageKeyEncipherment:   x509.KeyUsageKeyEncipherment,
	certificatesv1.UsageKeyAgreement:      x509.KeyUsageKeyAgreement,
	certificatesv1.UsageDataEncipherment:  x509.KeyUsageDataEncipherment,
	certificatesv1.UsageCertSign:          x509.KeyUsageCertSign,
	certificatesv1.UsageCRLSign:           x509.KeyUsageCRLSign,
	certificatesv1.UsageEncipherOnly:      x509.KeyUsageEncipherOnly,
	certificatesv1.UsageDecipherOnly:      x509.KeyUsageDecipherOnly,
}

var extKeyUsages = map[certificatesv1.KeyUsage]x509.ExtKeyUsage{
	certificatesv1.UsageAny:             x509.ExtKeyUsageAny,
	certificatesv1.UsageServerAuth:      x509.ExtKeyUsageServerAuth,
	certificatesv1.UsageClientAuth:      x509.ExtKeyUsageClientAuth,
	certificatesv1.UsageCodeSigning:     x509.ExtKeyUsageCodeSigning,
	certificatesv1.UsageEmailProtection: x509.ExtKeyUsageEmailProtection,
	certificatesv1.UsageSMIME:           x509.ExtKeyUsageEmailProtection,
	certificatesv1.UsageIPsecEndSystem:  x509.ExtKeyUsageIPSECEndSystem,
	certificatesv1.UsageIPsecTunnel:     x509.ExtKeyUsageIPSECTunnel,
	certificatesv1.UsageIPsecUser:       x509.ExtKeyUsageIPSECUser,
	certificatesv1.UsageTimestamping:    x509.ExtKeyUsageTimeStamping,
	certificatesv1.UsageOCSPSigning:     x509.ExtKeyUsageOCSPSigning,
	certificatesv1.UsageMicrosoftSGC:    x509.ExtKeyUsageMicrosoftServerGatedCrypto,
	certificatesv1.UsageNetscapeSGC:     x509.ExtKeyUsageNetscapeServerGatedCrypto,
}
