package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// File names inside the PKI directory.
const (
	CACertFile      = "ca.crt"
	CAKeyFile       = "ca.key"
	ServingCertFile = "apiserver.crt"
	ServingKeyFile  = "apiserver.key"
	AdminCertFile   = "admin.crt"
	AdminKeyFile    = "admin.key"
	// KubeletClientCertFile and KubeletClientKeyFile are the apiserver's
	// client certificate for kubelets (kubeadm's names).
	KubeletClientCertFile = "apiserver-kubelet-client.crt"
	KubeletClientKeyFile  = "apiserver-kubelet-client.key"
)

// Identities and lifetimes.
const (
	// AdminUser is the user name of the admin client certificate.
	AdminUser = "cairn-admin"
	// MastersGroup is the group that is allowed everything.
	MastersGroup = "system:masters"
	// KubeletClientUser is the user name of the apiserver's kubelet client
	// certificate (kubeadm's), in MastersGroup so kubelets let it read
	// logs and run exec (nodes/proxy).
	KubeletClientUser = "kube-apiserver-kubelet-client"

	caValidity   = 10 * 365 * 24 * time.Hour
	leafValidity = 365 * 24 * time.Hour
	// renewBefore is how close to expiry a leaf certificate is re-issued
	// by Load.
	renewBefore = 30 * 24 * time.Hour
	// backdate tolerates clocks that are a little behind ours.
	backdate = time.Hour
)

// DefaultHosts returns the names and addresses every serving certificate
// covers besides the hosts given to Load: loopback, and the names by which
// pods reach the apiserver through the kubernetes service.
func DefaultHosts() []string {
	return []string{
		"127.0.0.1", "::1", "localhost",
		"kubernetes", "kubernetes.default", "kubernetes.default.svc",
		"kubernetes.default.svc.cluster.local",
		// The kubernetes Service's ClusterIP in the default range, and the
		// address the node proxies relay to the apiserver from inside each
		// node's network namespace (proxy.APIServerAddress).
		"10.96.0.1", "100.64.0.1",
	}
}

// Sentinel errors. Check them with errors.Is.
var (
	// ErrMissingKey means a certificate exists without its private key.
	ErrMissingKey = errors.New("pki: certificate without key")
	// ErrBadPEM means a file does not hold the PEM block expected.
	ErrBadPEM = errors.New("pki: bad PEM")
)

// PKI is the loaded certificate authority and the certificates cairn
// itself uses. It is safe for concurrent use; the exported fields must not
// be modified.
type PKI struct {
	// Dir is the directory the files live in.
	Dir string
	// CACert is the parsed CA certificate.
	CACert *x509.Certificate
	// CAPEM is the CA certificate in PEM form (ca.crt).
	CAPEM []byte
	// CAPool holds only the CA: use it to verify clients and servers.
	CAPool *x509.CertPool
	// Serving is the apiserver's serving certificate and key.
	Serving tls.Certificate
	// AdminCertPEM and AdminKeyPEM are the admin client certificate
	// (CN=cairn-admin, O=system:masters) and its key, in PEM form.
	AdminCertPEM []byte
	AdminKeyPEM  []byte
	// KubeletClient is the apiserver's client certificate for kubelets
	// (CN=kube-apiserver-kubelet-client, O=system:masters) and its key.
	KubeletClient tls.Certificate

	caKey *ecdsa.PrivateKey
}

// Load reads the PKI from dir, creating whatever is missing. hosts are
// extra DNS names or IP addresses the serving certificate must cover, on
// top of DefaultHosts; when an existing serving certificate lacks one, it is
// re-issued. Load is not safe to call concurrently on the same dir from
// several processes.
func Load(dir string, hosts []string) (*PKI, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("pki: create dir: %w", err)
	}
	p := &PKI{Dir: dir}
	if err := p.loadOrCreateCA(); err != nil {
		return nil, err
	}
	p.CAPool = x509.NewCertPool()
	p.CAPool.AddCert(p.CACert)

	all := append(DefaultHosts(), hosts...)
	serving := func() (*x509.Certificate, *ecdsa.PrivateKey, error) {
		return p.issue(servingTemplate(all))
	}
	certPEM, keyPEM, err := p.loadOrIssueLeaf(ServingCertFile, ServingKeyFile, serving, func(c *x509.Certificate) bool {
		return coversHosts(c, all)
	})
	if err != nil {
		return nil, err
	}
	if p.Serving, err = tls.X509KeyPair(certPEM, keyPEM); err != nil {
		return nil, fmt.Errorf("pki: serving key pair: %w", err)
	}

	admin := func() (*x509.Certificate, *ecdsa.PrivateKey, error) {
		return p.issue(clientTemplate(AdminUser, []string{MastersGroup}))
	}
	p.AdminCertPEM, p.AdminKeyPEM, err = p.loadOrIssueLeaf(AdminCertFile, AdminKeyFile, admin, nil)
	if err != nil {
		return nil, err
	}

	kubeletGroups := []string{MastersGroup}
	kubeletClient := func() (*x509.Certificate, *ecdsa.PrivateKey, error) {
		return p.issue(clientTemplate(KubeletClientUser, kubeletGroups))
	}
	certPEM, keyPEM, err = p.loadOrIssueLeaf(KubeletClientCertFile, KubeletClientKeyFile, kubeletClient, func(c *x509.Certificate) bool {
		return c.Subject.CommonName == KubeletClientUser && slices.Equal(c.Subject.Organization, kubeletGroups)
	})
	if err != nil {
		return nil, err
	}
	if p.KubeletClient, err = tls.X509KeyPair(certPEM, keyPEM); err != nil {
		return nil, fmt.Errorf("pki: kubelet client key pair: %w", err)
	}
	return p, nil
}

// IssueClient issues a client certificate for user cn in the given groups,
// signed by the CA and valid for one year. Nothing is written to disk. For
// a node use cn "system:node:<name>" and group "system:nodes"; for the
// controllers "system:kube-controller-manager" and "system:kube-scheduler".
func (p *PKI) IssueClient(cn string, groups []string) (certPEM, keyPEM []byte, err error) {
	if cn == "" {
		return nil, nil, errors.New("pki: issue client: empty common name")
	}
	cert, key, err := p.issue(clientTemplate(cn, groups))
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err = encodeKey(key)
	if err != nil {
		return nil, nil, err
	}
	return encodeCert(cert), keyPEM, nil
}

// ServerTLSConfig returns a TLS configuration for the apiserver: it serves
// the serving certificate and verifies client certificates against the CA
// when a client presents one (clients without one may still authenticate
// otherwise, e.g. with a token).
func (p *PKI) ServerTLSConfig() *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{p.Serving},
		ClientCAs:    p.CAPool,
		ClientAuth:   tls.VerifyClientCertIfGiven,
	}
}

// KubeletClientTLSConfig returns the TLS configuration the apiserver
// reaches kubelets with (apiserver.Config.KubeletClientTLS): it presents
// the kubelet client certificate, which kubelets verify against the CA
// (their --client-ca-file) and authorize as system:masters. It does not
// verify the kubelet's serving certificate, which kubelets sign themselves:
// kube-apiserver without --kubelet-certificate-authority does the same.
func (p *PKI) KubeletClientTLSConfig() *tls.Config {
	return &tls.Config{
		MinVersion:         tls.VersionTLS12,
		Certificates:       []tls.Certificate{p.KubeletClient},
		InsecureSkipVerify: true, //nolint:gosec // kubelets serve self-signed certificates; see above
	}
}

// ClientIdentity is who a verified TLS client certificate says its
// holder is, as Kubernetes reads it: the common name is the user, the
// organizations are the groups. ok is false when the server verified no
// client certificate. The apiserver and the kubelet both authenticate this
// way.
func ClientIdentity(cs *tls.ConnectionState) (user string, groups []string, ok bool) {
	if cs == nil || len(cs.VerifiedChains) == 0 || len(cs.VerifiedChains[0]) == 0 {
		return "", nil, false
	}
	c := cs.VerifiedChains[0][0]
	return c.Subject.CommonName, slices.Clone(c.Subject.Organization), true
}

// LoadCA reads the CA of an existing PKI in dir and creates nothing: the
// result issues client certificates (IssueClient) for another process
// than the one that owns dir, such as a kubelet joining the cluster of a
// running `cairn up`; its other certificate fields are empty. A dir without
// ca.crt is an error satisfying errors.Is(err, fs.ErrNotExist); one
// without ca.key next to ca.crt is ErrMissingKey.
func LoadCA(dir string) (*PKI, error) {
	p := &PKI{Dir: dir}
	if err := p.readCA(); err != nil {
		return nil, err
	}
	p.CAPool = x509.NewCertPool()
	p.CAPool.AddCert(p.CACert)
	return p, nil
}

// loadOrCreateCA reads ca.crt and ca.key, or creates both when ca.crt does
// not exist. ca.crt is written last, so it marks a complete CA.
func (p *PKI) loadOrCreateCA() error {
	err := p.readCA()
	if errors.Is(err, fs.ErrNotExist) { // a missing key is ErrMissingKey, not this
		return p.createCA(filepath.Join(p.Dir, CACertFile), filepath.Join(p.Dir, CAKeyFile))
	}
	return err
}

// readCA reads ca.crt and ca.key. A missing ca.crt is an error wrapping
// fs.ErrNotExist, a missing ca.key ErrMissingKey.
func (p *PKI) readCA() error {
	certPath := filepath.Join(p.Dir, CACertFile)
	keyPath := filepath.Join(p.Dir, CAKeyFile)
	certPEM, err := os.ReadFile(certPath)
	if err != nil {
		return fmt.Errorf("pki: read CA: %w", err)
	}
	keyPEM, err := os.ReadFile(keyPath)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("pki: read CA key %s: %w", keyPath, ErrMissingKey)
	}
	if err != nil {
		return fmt.Errorf("pki: read CA key: %w", err)
	}
	if p.CACert, err = decodeCert(certPEM); err != nil {
		return fmt.Errorf("pki: CA %s: %w", certPath, err)
	}
	if p.caKey, err = decodeKey(keyPEM); err != nil {
		return fmt.Errorf("pki: CA key %s: %w", keyPath, err)
	}
	if !p.caKey.PublicKey.Equal(p.CACert.PublicKey) {
		return fmt.Errorf("pki: CA key %s does not match %s", keyPath, certPath)
	}
	p.CAPEM = certPEM
	return nil
}

func (p *PKI) createCA(certPath, keyPath string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("pki: generate CA key: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "cairn-ca", Organization: []string{"cairn"}},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(caValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return fmt.Errorf("pki: create CA: %w", err)
	}
	if p.CACert, err = x509.ParseCertificate(der); err != nil {
		return fmt.Errorf("pki: parse CA: %w", err)
	}
	p.caKey = key
	p.CAPEM = encodeCert(p.CACert)
	keyPEM, err := encodeKey(key)
	if err != nil {
		return err
	}
	if err := writeFile(keyPath, keyPEM, 0o600); err != nil {
		return err
	}
	return writeFile(certPath, p.CAPEM, 0o644)
}

// loadOrIssueLeaf returns the PEM pair in certFile/keyFile if it is usable
// (matching key, signed by the CA, not close to expiry, and accepted by ok
// when ok is not nil); otherwise it issues a new pair and writes it.
func (p *PKI) loadOrIssueLeaf(certFile, keyFile string, issue func() (*x509.Certificate, *ecdsa.PrivateKey, error), ok func(*x509.Certificate) bool) (certPEM, keyPEM []byte, err error) {
	certPath := filepath.Join(p.Dir, certFile)
	keyPath := filepath.Join(p.Dir, keyFile)
	certPEM, certErr := os.ReadFile(certPath)
	keyPEM, keyErr := os.ReadFile(keyPath)
	if certErr == nil && keyErr == nil && p.usable(certPEM, keyPEM, ok) {
		return certPEM, keyPEM, nil
	}
	for _, err := range []error{certErr, keyErr} {
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, nil, fmt.Errorf("pki: read %s: %w", certFile, err)
		}
	}
	cert, key, err := issue()
	if err != nil {
		return nil, nil, err
	}
	certPEM = encodeCert(cert)
	if keyPEM, err = encodeKey(key); err != nil {
		return nil, nil, err
	}
	if err := writeFile(keyPath, keyPEM, 0o600); err != nil {
		return nil, nil, err
	}
	if err := writeFile(certPath, certPEM, 0o644); err != nil {
		return nil, nil, err
	}
	return certPEM, keyPEM, nil
}

func (p *PKI) usable(certPEM, keyPEM []byte, ok func(*x509.Certificate) bool) bool {
	if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
		return false
	}
	cert, err := decodeCert(certPEM)
	if err != nil {
		return false
	}
	if time.Until(cert.NotAfter) < renewBefore {
		return false
	}
	if _, err := cert.Verify(x509.VerifyOptions{
		Roots:     p.CAPool,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny},
	}); err != nil {
		return false
	}
	return ok == nil || ok(cert)
}

// issue signs tmpl with the CA for a fresh P-256 key.
func (p *PKI) issue(tmpl *x509.Certificate) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("pki: generate key: %w", err)
	}
	if tmpl.SerialNumber, err = newSerial(); err != nil {
		return nil, nil, err
	}
	now := time.Now()
	tmpl.NotBefore = now.Add(-backdate)
	tmpl.NotAfter = now.Add(leafValidity)
	if tmpl.NotAfter.After(p.CACert.NotAfter) {
		tmpl.NotAfter = p.CACert.NotAfter
	}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.BasicConstraintsValid = true
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.CACert, &key.PublicKey, p.caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("pki: sign %q: %w", tmpl.Subject.CommonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, fmt.Errorf("pki: parse %q: %w", tmpl.Subject.CommonName, err)
	}
	return cert, key, nil
}

func servingTemplate(hosts []string) *x509.Certificate {
	t := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "cairn-apiserver"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			if !slices.ContainsFunc(t.IPAddresses, ip.Equal) {
				t.IPAddresses = append(t.IPAddresses, ip)
			}
		} else if h != "" && !slices.Contains(t.DNSNames, h) {
			t.DNSNames = append(t.DNSNames, h)
		}
	}
	return t
}

func clientTemplate(cn string, groups []string) *x509.Certificate {
	return &x509.Certificate{
		Subject:     pkix.Name{CommonName: cn, Organization: slices.Clone(groups)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
}

// coversHosts reports whether cert is valid for every host.
func coversHosts(cert *x509.Certificate, hosts []string) bool {
	for _, h := range hosts {
		if h != "" && cert.VerifyHostname(h) != nil {
			return false
		}
	}
	return true
}

func newSerial() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("pki: serial: %w", err)
	}
	return n.Add(n, big.NewInt(1)), nil // serials must be positive
}

func encodeCert(c *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
}

func encodeKey(k *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		return nil, fmt.Errorf("pki: marshal key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

func decodeCert(b []byte) (*x509.Certificate, error) {
	block, _ := pem.Decode(b)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, ErrBadPEM
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parse certificate: %w", err)
	}
	return c, nil
}

// decodeKey accepts SEC 1 ("EC PRIVATE KEY") and PKCS #8 ("PRIVATE KEY")
// ECDSA keys.
func decodeKey(b []byte) (*ecdsa.PrivateKey, error) {
	block, _ := pem.Decode(b)
	if block == nil {
		return nil, ErrBadPEM
	}
	switch block.Type {
	case "EC PRIVATE KEY":
		k, err := x509.ParseECPrivateKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("parse key: %w", err)
		}
		return k, nil
	case "PRIVATE KEY":
		k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("parse key: %w", err)
		}
		ek, ok := k.(*ecdsa.PrivateKey)
		if !ok {
			return nil, fmt.Errorf("parse key: %T is not ECDSA: %w", k, ErrBadPEM)
		}
		return ek, nil
	}
	return nil, ErrBadPEM
}

// writeFile writes data to path through a temporary file and a rename, so
// readers see the old or the new content, never a part.
func writeFile(path string, data []byte, perm os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("pki: write %s: %w", path, err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // no-op after a successful rename
	if err := f.Chmod(perm); err != nil {
		f.Close()
		return fmt.Errorf("pki: write %s: %w", path, err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("pki: write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("pki: write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("pki: write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("pki: write %s: %w", path, err)
	}
	return nil
}
