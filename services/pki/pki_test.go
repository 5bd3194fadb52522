package pki

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func mustLoad(t *testing.T, dir string, hosts []string) *PKI {
	t.Helper()
	p, err := Load(dir, hosts)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return p
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestLoadCreatesFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	p := mustLoad(t, dir, nil)

	files := []struct {
		name string
		want os.FileMode
	}{
		{CACertFile, 0o644},
		{CAKeyFile, 0o600},
		{ServingCertFile, 0o644},
		{ServingKeyFile, 0o600},
		{AdminCertFile, 0o644},
		{AdminKeyFile, 0o600},
		{KubeletClientCertFile, 0o644},
		{KubeletClientKeyFile, 0o600},
	}
	for _, f := range files {
		t.Run(f.name, func(t *testing.T) {
			st, err := os.Stat(filepath.Join(dir, f.name))
			if err != nil {
				t.Fatal(err)
			}
			if got := st.Mode().Perm(); got != f.want {
				t.Errorf("mode = %v, want %v", got, f.want)
			}
		})
	}
	st, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Mode().Perm(); got != 0o700 {
		t.Errorf("dir mode = %v, want 0700", got)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != len(files) {
		t.Errorf("dir has %d entries, want %d (leftover temporary files?)", len(entries), len(files))
	}

	ca := p.CACert
	if !ca.IsCA {
		t.Error("CA is not a CA")
	}
	pub, ok := ca.PublicKey.(*ecdsa.PublicKey)
	if !ok || pub.Curve != elliptic.P256() {
		t.Errorf("CA key = %T, want ECDSA P-256", ca.PublicKey)
	}
	if life := ca.NotAfter.Sub(ca.NotBefore); life < 10*365*24*time.Hour {
		t.Errorf("CA lifetime = %v, want at least 10 years", life)
	}
	if !bytes.Equal(p.CAPEM, readFile(t, filepath.Join(dir, CACertFile))) {
		t.Error("CAPEM differs from ca.crt")
	}
}

func TestServingCert(t *testing.T) {
	p := mustLoad(t, t.TempDir(), []string{"10.96.0.1", "cairn.example"})
	leaf, err := x509.ParseCertificate(p.Serving.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, host := range []string{"127.0.0.1", "::1", "localhost", "kubernetes.default.svc", "10.96.0.1", "cairn.example"} {
		t.Run(host, func(t *testing.T) {
			_, err := leaf.Verify(x509.VerifyOptions{
				DNSName:   host,
				Roots:     p.CAPool,
				KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
			})
			if err != nil {
				t.Errorf("verify for %s: %v", host, err)
			}
		})
	}
	if err := leaf.VerifyHostname("other.example"); err == nil {
		t.Error("serving cert valid for a host it was not issued for")
	}
}

func TestReloadKeepsEverything(t *testing.T) {
	dir := t.TempDir()
	first := mustLoad(t, dir, []string{"10.0.0.5"})
	second := mustLoad(t, dir, []string{"10.0.0.5"})

	if !bytes.Equal(first.CAPEM, second.CAPEM) {
		t.Error("CA changed on reload")
	}
	if !bytes.Equal(first.Serving.Certificate[0], second.Serving.Certificate[0]) {
		t.Error("serving cert re-issued on reload with the same hosts")
	}
	if !bytes.Equal(first.AdminCertPEM, second.AdminCertPEM) || !bytes.Equal(first.AdminKeyPEM, second.AdminKeyPEM) {
		t.Error("admin cert re-issued on reload")
	}
	if !bytes.Equal(first.KubeletClient.Certificate[0], second.KubeletClient.Certificate[0]) {
		t.Error("kubelet client cert re-issued on reload")
	}
	// Signing still works with the reloaded CA key.
	if _, _, err := second.IssueClient("system:kube-scheduler", nil); err != nil {
		t.Errorf("IssueClient after reload: %v", err)
	}
}

func TestReloadReissues(t *testing.T) {
	tests := []struct {
		name        string
		mutate      func(t *testing.T, dir string)
		hosts       []string
		wantNewCA   bool
		wantServing bool // serving cert re-issued
		wantAdmin   bool // admin cert re-issued
		wantKubelet bool // kubelet client cert re-issued
	}{
		{
			name:        "new host",
			mutate:      func(*testing.T, string) {},
			hosts:       []string{"192.168.1.10"},
			wantServing: true,
		},
		{
			name:        "serving key removed",
			mutate:      func(t *testing.T, dir string) { remove(t, dir, ServingKeyFile) },
			wantServing: true,
		},
		{
			name:      "admin cert corrupt",
			mutate:    func(t *testing.T, dir string) { write(t, dir, AdminCertFile, []byte("garbage")) },
			wantAdmin: true,
		},
		{
			name: "admin key of another cert",
			mutate: func(t *testing.T, dir string) {
				write(t, dir, AdminKeyFile, readFile(t, filepath.Join(dir, ServingKeyFile)))
			},
			wantAdmin: true,
		},
		{
			name:        "kubelet client cert removed",
			mutate:      func(t *testing.T, dir string) { remove(t, dir, KubeletClientCertFile) },
			wantKubelet: true,
		},
		{
			name: "kubelet client cert of another user",
			mutate: func(t *testing.T, dir string) {
				// A valid pair from the same CA, but the admin's identity.
				write(t, dir, KubeletClientCertFile, readFile(t, filepath.Join(dir, AdminCertFile)))
				write(t, dir, KubeletClientKeyFile, readFile(t, filepath.Join(dir, AdminKeyFile)))
			},
			wantKubelet: true,
		},
		{
			name:        "CA removed",
			mutate:      func(t *testing.T, dir string) { remove(t, dir, CACertFile); remove(t, dir, CAKeyFile) },
			wantNewCA:   true,
			wantServing: true,
			wantAdmin:   true,
			wantKubelet: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			before := mustLoad(t, dir, nil)
			tt.mutate(t, dir)
			after := mustLoad(t, dir, tt.hosts)

			if got := !bytes.Equal(before.CAPEM, after.CAPEM); got != tt.wantNewCA {
				t.Errorf("new CA = %v, want %v", got, tt.wantNewCA)
			}
			if got := !bytes.Equal(before.Serving.Certificate[0], after.Serving.Certificate[0]); got != tt.wantServing {
				t.Errorf("serving re-issued = %v, want %v", got, tt.wantServing)
			}
			if got := !bytes.Equal(before.AdminCertPEM, after.AdminCertPEM); got != tt.wantAdmin {
				t.Errorf("admin re-issued = %v, want %v", got, tt.wantAdmin)
			}
			beforeKC := leafPEM(before.KubeletClient)
			afterKC := leafPEM(after.KubeletClient)
			if got := !bytes.Equal(beforeKC, afterKC); got != tt.wantKubelet {
				t.Errorf("kubelet client re-issued = %v, want %v", got, tt.wantKubelet)
			}
			if kc := verifyClient(t, after, afterKC); kc.Subject.CommonName != KubeletClientUser {
				t.Errorf("kubelet client cert CN = %q", kc.Subject.CommonName)
			}
			if !bytes.Equal(afterKC, readFile(t, filepath.Join(dir, KubeletClientCertFile))) {
				t.Error("kubelet client cert in memory differs from the file")
			}
			// Whatever was re-issued, everything chains to the current CA.
			if _, err := tls.X509KeyPair(after.AdminCertPEM, after.AdminKeyPEM); err != nil {
				t.Errorf("admin key pair: %v", err)
			}
			verifyClient(t, after, after.AdminCertPEM)
			leaf, _ := x509.ParseCertificate(after.Serving.Certificate[0])
			if _, err := leaf.Verify(x509.VerifyOptions{Roots: after.CAPool}); err != nil {
				t.Errorf("serving cert does not chain to CA: %v", err)
			}
			if reloaded := mustLoad(t, dir, tt.hosts); !bytes.Equal(reloaded.Serving.Certificate[0], after.Serving.Certificate[0]) {
				t.Error("serving cert not stable after re-issue")
			}
		})
	}
}

func TestMissingCAKey(t *testing.T) {
	dir := t.TempDir()
	mustLoad(t, dir, nil)
	remove(t, dir, CAKeyFile)
	_, err := Load(dir, nil)
	if !errors.Is(err, ErrMissingKey) {
		t.Fatalf("Load = %v, want ErrMissingKey", err)
	}
}

// TestLoadCA: LoadCA reads the CA of an existing PKI and issues client
// certificates the PKI's owner verifies, writing nothing; without a CA it
// fails and creates nothing.
func TestLoadCA(t *testing.T) {
	owner := mustLoad(t, t.TempDir(), nil)
	noKey := t.TempDir()
	mustLoad(t, noKey, nil)
	remove(t, noKey, CAKeyFile)
	tests := []struct {
		name    string
		dir     string
		wantErr error // nil: loads
	}{
		{name: "existing PKI", dir: owner.Dir},
		{name: "no PKI", dir: filepath.Join(t.TempDir(), "pki"), wantErr: fs.ErrNotExist},
		{name: "CA without key", dir: noKey, wantErr: ErrMissingKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := dirState(t, tt.dir)
			p, err := LoadCA(tt.dir)
			if after := dirState(t, tt.dir); after != before {
				t.Errorf("LoadCA changed %s:\n%s\nwas\n%s", tt.dir, after, before)
			}
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("LoadCA = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			certPEM, _, err := p.IssueClient("system:node:n1", []string{"system:nodes"})
			if err != nil {
				t.Fatal(err)
			}
			if cert := verifyClient(t, owner, certPEM); cert.Subject.CommonName != "system:node:n1" {
				t.Errorf("CN = %q", cert.Subject.CommonName)
			}
			if !bytes.Equal(p.CAPEM, owner.CAPEM) {
				t.Error("CAPEM differs from the owner's")
			}
		})
	}
}

// dirState lists dir's files with their sizes and modification times
// ("missing" when dir does not exist).
func dirState(t *testing.T, dir string) string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return "missing"
	}
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s %d %s\n", e.Name(), info.Size(), info.ModTime().Format(time.RFC3339Nano))
	}
	return b.String()
}

func TestIssueClient(t *testing.T) {
	p := mustLoad(t, t.TempDir(), nil)
	tests := []struct {
		cn     string
		groups []string
	}{
		{"cairn-admin", []string{"system:masters"}},
		{"system:kube-controller-manager", nil},
		{"system:kube-scheduler", nil},
		{"system:node:node-1", []string{"system:nodes"}},
		{"alice", []string{"dev", "ops"}},
	}
	for _, tt := range tests {
		t.Run(tt.cn, func(t *testing.T) {
			certPEM, keyPEM, err := p.IssueClient(tt.cn, tt.groups)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
				t.Fatalf("key pair: %v", err)
			}
			cert := verifyClient(t, p, certPEM)
			if cert.Subject.CommonName != tt.cn {
				t.Errorf("CN = %q, want %q", cert.Subject.CommonName, tt.cn)
			}
			if !slices.Equal(cert.Subject.Organization, tt.groups) && len(tt.groups)+len(cert.Subject.Organization) > 0 {
				t.Errorf("O = %q, want %q", cert.Subject.Organization, tt.groups)
			}
		})
	}
	if _, _, err := p.IssueClient("", nil); err == nil {
		t.Error("IssueClient with empty CN succeeded")
	}
}

func TestAdminCert(t *testing.T) {
	p := mustLoad(t, t.TempDir(), nil)
	cert := verifyClient(t, p, p.AdminCertPEM)
	if cert.Subject.CommonName != AdminUser || !slices.Equal(cert.Subject.Organization, []string{MastersGroup}) {
		t.Errorf("admin subject = %v", cert.Subject)
	}
}

// TestTLSHandshake runs a real HTTPS server with ServerTLSConfig and checks
// that a client trusting only CAPEM reaches it and is identified by its
// client certificate.
func TestTLSHandshake(t *testing.T) {
	p := mustLoad(t, t.TempDir(), nil)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(r.TLS.PeerCertificates) == 0 {
			io.WriteString(w, "anonymous")
			return
		}
		io.WriteString(w, r.TLS.PeerCertificates[0].Subject.CommonName)
	}))
	srv.TLS = p.ServerTLSConfig()
	srv.StartTLS()
	t.Cleanup(srv.Close)

	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(p.CAPEM) {
		t.Fatal("CAPEM holds no certificate")
	}
	nodeCert, nodeKey, err := p.IssueClient("system:node:n1", []string{"system:nodes"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		certPEM []byte
		keyPEM  []byte
		want    string
	}{
		{"admin", p.AdminCertPEM, p.AdminKeyPEM, AdminUser},
		{"node", nodeCert, nodeKey, "system:node:n1"},
		{"no client cert", nil, nil, "anonymous"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := &tls.Config{RootCAs: roots, ServerName: "localhost"}
			if tt.certPEM != nil {
				kp, err := tls.X509KeyPair(tt.certPEM, tt.keyPEM)
				if err != nil {
					t.Fatal(err)
				}
				cfg.Certificates = []tls.Certificate{kp}
			}
			tr := &http.Transport{TLSClientConfig: cfg}
			defer tr.CloseIdleConnections()
			resp, err := (&http.Client{Transport: tr}).Get(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if string(body) != tt.want {
				t.Errorf("server saw %q, want %q", body, tt.want)
			}
		})
	}
}

// TestKubeletClientTLS runs a real HTTPS server standing in for a kubelet:
// a self-signed serving certificate (httptest's, not from the CA) that
// requires a client certificate from the CA, as a kubelet with
// --client-ca-file does. KubeletClientTLSConfig reaches it and is seen as
// kube-apiserver-kubelet-client in system:masters; without the client
// certificate the handshake fails.
func TestKubeletClientTLS(t *testing.T) {
	p := mustLoad(t, t.TempDir(), nil)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := r.TLS.VerifiedChains[0][0]
		io.WriteString(w, c.Subject.CommonName+" "+strings.Join(c.Subject.Organization, ","))
	}))
	srv.TLS = &tls.Config{ClientCAs: p.CAPool, ClientAuth: tls.RequireAndVerifyClientCert}
	srv.StartTLS()
	t.Cleanup(srv.Close)

	cfg := p.KubeletClientTLSConfig()
	if cfg.MinVersion < tls.VersionTLS12 {
		t.Errorf("MinVersion = %x", cfg.MinVersion)
	}
	get := func(cfg *tls.Config) (string, error) {
		tr := &http.Transport{TLSClientConfig: cfg}
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr}).Get(srv.URL)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	got, err := get(cfg)
	if err != nil {
		t.Fatalf("with the kubelet client certificate: %v", err)
	}
	if want := KubeletClientUser + " " + MastersGroup; got != want {
		t.Errorf("server saw %q, want %q", got, want)
	}
	noCert := cfg.Clone()
	noCert.Certificates = nil
	if got, err := get(noCert); err == nil {
		t.Errorf("without a client certificate: %q, want a handshake error", got)
	}
}

// leafPEM is the PEM of a key pair's leaf certificate.
func leafPEM(c tls.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Certificate[0]})
}

func verifyClient(t *testing.T, p *PKI, certPEM []byte) *x509.Certificate {
	t.Helper()
	cert, err := decodeCert(certPEM)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cert.Verify(x509.VerifyOptions{
		Roots:     p.CAPool,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}); err != nil {
		t.Errorf("client cert %q does not verify: %v", cert.Subject.CommonName, err)
	}
	return cert
}

func remove(t *testing.T, dir, name string) {
	t.Helper()
	if err := os.Remove(filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
}

func write(t *testing.T, dir, name string, data []byte) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
		t.Fatal(err)
	}
}
