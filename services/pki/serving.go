package pki

import (
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"time"
)

// IssueServing issues a serving certificate for hosts (DNS names and IP
// addresses), signed by the cluster CA and valid for one year, with cn as
// its common name. Nothing is written to disk. It is what an in-cluster
// HTTPS server whose clients trust the cluster CA serves, e.g. an
// admission webhook behind the Service <name>.<namespace> with host
// <name>.<namespace>.svc, the name the apiserver checks.
func (p *PKI) IssueServing(cn string, hosts []string) (certPEM, keyPEM []byte, err error) {
	if len(hosts) == 0 {
		return nil, nil, errors.New("pki: issue serving: no hosts")
	}
	tmpl := servingTemplate(hosts)
	tmpl.Subject.CommonName = cn
	cert, key, err := p.issue(tmpl)
	if err != nil {
		return nil, nil, fmt.Errorf("pki: issue serving: %w", err)
	}
	if keyPEM, err = encodeKey(key); err != nil {
		return nil, nil, err
	}
	return encodeCert(cert), keyPEM, nil
}

// SignRequest signs a certificate for the public key pub with tmpl's
// subject, names and usages, valid from now-backdate until now+validity
// (capped at the CA's own expiry), and returns it in PEM form. It is the
// cluster signer of CertificateSigningRequests; the caller has checked
// what may be signed. A PKI without the CA key (LoadCA of a directory
// without ca.key cannot happen: LoadCA fails) cannot sign.
func (p *PKI) SignRequest(tmpl *x509.Certificate, pub any, backdate, validity time.Duration) ([]byte, error) {
	if p.caKey == nil {
		return nil, errors.New("pki: sign: no CA key")
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	t := *tmpl
	t.SerialNumber = serial
	now := time.Now()
	t.NotBefore = now.Add(-backdate)
	t.NotAfter = now.Add(validity)
	if t.NotAfter.After(p.CACert.NotAfter) {
		t.NotAfter = p.CACert.NotAfter
	}
	t.BasicConstraintsValid = true
	t.IsCA = false
	der, err := x509.CreateCertificate(rand.Reader, &t, p.CACert, pub, p.caKey)
	if err != nil {
		return nil, fmt.Errorf("pki: sign %q: %w", t.Subject.CommonName, err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}
