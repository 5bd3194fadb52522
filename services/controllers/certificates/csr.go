package certificates

import (
	"crypto/x509"
	"errors"
	"fmt"
	"slices"
	"strings"

	certificatesv1 "k8s.io/api/certificates/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

var csrResource = certificatesv1.SchemeGroupVersion.WithResource("certificatesigningrequests")

// Identities of the built-in signers' subjects.
const (
	nodeUserPrefix = "system:node:"
	nodesGroup     = "system:nodes"
	kubeProxyUser  = "system:kube-proxy"
)

func hasCondition(c *certificatesv1.CertificateSigningRequest, t certificatesv1.RequestConditionType) bool {
	for _, cond := range c.Status.Conditions {
		if cond.Type == t {
			return true
		}
	}
	return false
}

func isApproved(c *certificatesv1.CertificateSigningRequest) bool {
	return hasCondition(c, certificatesv1.CertificateApproved) && !hasCondition(c, certificatesv1.CertificateDenied)
}

var (
	// Usages kube accepts for a kubelet's client certificate, with and
	// without key encipherment (which only RSA keys use).
	kubeletClientUsages       = sets.New(certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageClientAuth)
	kubeletClientUsagesNoRSA  = sets.New(certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth)
	kubeletServingUsages      = sets.New(certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageServerAuth)
	kubeletServingUsagesNoRSA = sets.New(certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth)
	clientUsages              = sets.New(certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageClientAuth)
)

var (
	errOrganization = errors.New("subject organization is not system:nodes")
	errCommonName   = errors.New("subject common name does not begin with system:node:")
	errNames        = errors.New("DNS, email, IP or URI subjectAltNames are not allowed")
)

func usagesAre(usages []certificatesv1.KeyUsage, allowed ...sets.Set[certificatesv1.KeyUsage]) bool {
	got := sets.New(usages...)
	return slices.ContainsFunc(allowed, got.Equal)
}

// validateKubeletClient is kube's ValidateKubeletClientCSR.
func validateKubeletClient(req *x509.CertificateRequest, usages []certificatesv1.KeyUsage) error {
	if !slices.Equal(req.Subject.Organization, []string{nodesGroup}) {
		return errOrganization
	}
	if len(req.DNSNames) > 0 || len(req.EmailAddresses) > 0 || len(req.IPAddresses) > 0 || len(req.URIs) > 0 {
		return errNames
	}
	if !strings.HasPrefix(req.Subject.CommonName, nodeUserPrefix) {
		return errCommonName
	}
	if !usagesAre(usages, kubeletClientUsages, kubeletClientUsagesNoRSA) {
		return fmt.Errorf("usages did not match %v", sets.List(kubeletClientUsages))
	}
	return nil
}

// validateKubeletServing is kube's ValidateKubeletServingCSR.
func validateKubeletServing(req *x509.CertificateRequest, usages []certificatesv1.KeyUsage) error {
	if !slices.Equal(req.Subject.Organization, []string{nodesGroup}) {
		return errOrganization
	}
	if len(req.DNSNames) == 0 && len(req.IPAddresses) == 0 {
		return errors.New("DNS or IP subjectAltName is required")
	}
	if len(req.EmailAddresses) > 0 || len(req.URIs) > 0 {
		return errors.New("email and URI subjectAltNames are not allowed")
	}
	if !strings.HasPrefix(req.Subject.CommonName, nodeUserPrefix) {
		return errCommonName
	}
	if !usagesAre(usages, kubeletServingUsages, kubeletServingUsagesNoRSA) {
		return fmt.Errorf("usages did not match %v", sets.List(kubeletServingUsages))
	}
	return nil
}

// validateClient is the kube-apiserver-client signer's check: client
// usages only.
func validateClient(_ *x509.CertificateRequest, usages []certificatesv1.KeyUsage) error {
	for _, u := range usages {
		if !clientUsages.Has(u) {
			return fmt.Errorf("invalid usage for client certificate: %s", u)
		}
	}
	return nil
}

// isKubeProxyClient is cairn's recognizer of the proxy's request.
func isKubeProxyClient(c *certificatesv1.CertificateSigningRequest, req *x509.CertificateRequest) bool {
	return c.Spec.SignerName == certificatesv1.KubeAPIServerClientSignerName &&
		req.Subject.CommonName == kubeProxyUser && len(req.Subject.Organization) == 0 &&
		len(req.DNSNames) == 0 && len(req.EmailAddresses) == 0 && len(req.IPAddresses) == 0 && len(req.URIs) == 0 &&
		usagesAre(c.Spec.Usages, kubeletClientUsages, kubeletClientUsagesNoRSA)
}
