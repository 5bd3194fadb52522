// Package csrtest helps tests of CertificateSigningRequests: a fresh PEM
// certificate request for a subject, and the parse of an issued
// certificate.
package csrtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"testing"
)

// Request is a PEM PKCS#10 request for subject, signed by a new P-256 key.
func Request(t testing.TB, subject pkix.Name) []byte {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: subject}, k)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

// ParseCert parses the first PEM certificate of data, failing t if there
// is none.
func ParseCert(t testing.TB, data []byte) *x509.Certificate {
	t.Helper()
	b, _ := pem.Decode(data)
	if b == nil || b.Type != "CERTIFICATE" {
		t.Fatalf("no PEM certificate in %q", data)
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
