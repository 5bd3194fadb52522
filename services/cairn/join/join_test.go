package join

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/cairn-dev/cairn/services/embedded/endpoints"
	"github.com/cairn-dev/cairn/services/pki"
)

// TestNodeKubeconfig: a node joining a data directory gets a kubeconfig for
// the apiserver of its endpoints file, with a certificate of the cluster CA
// for system:node:<name> in system:nodes; a second call keeps it; without
// a running cluster or a CA there is nothing to join and nothing is made.
func TestNodeKubeconfig(t *testing.T) {
	const server = "https://127.0.0.1:16443"
	running := t.TempDir()
	ca, err := pki.Load(filepath.Join(running, "pki"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := endpoints.Write(endpoints.Path(running), endpoints.Set{NATS: "nats://127.0.0.1:4222", APIServer: server}); err != nil {
		t.Fatal(err)
	}
	stopped := t.TempDir()
	if _, err := pki.Load(filepath.Join(stopped, "pki"), nil); err != nil {
		t.Fatal(err)
	}
	noPKI := t.TempDir()
	if err := endpoints.Write(endpoints.Path(noPKI), endpoints.Set{APIServer: server}); err != nil {
		t.Fatal(err)
	}

	path, issued, err := NodeKubeconfig(running, "n1")
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(running, "nodes", "n1", "kubelet.kubeconfig"); path != want || !issued {
		t.Fatalf("NodeKubeconfig = %s, issued %v; want %s, issued", path, issued, want)
	}
	rc, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	if rc.Host != server {
		t.Errorf("server = %q, want %q", rc.Host, server)
	}
	block, _ := pem.Decode(rc.TLSClientConfig.CertData)
	if block == nil {
		t.Fatal("no client certificate in the kubeconfig")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if cert.Subject.CommonName != "system:node:n1" || !slices.Equal(cert.Subject.Organization, []string{"system:nodes"}) {
		t.Errorf("subject = %v, want CN=system:node:n1, O=system:nodes", cert.Subject)
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: ca.CAPool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("node certificate against the cluster CA: %v", err)
	}
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o600 {
		t.Errorf("mode = %v, want 0600", info.Mode().Perm())
	}
	before, _ := os.ReadFile(path)
	if _, issued, err := NodeKubeconfig(running, "n1"); err != nil || issued {
		t.Errorf("second NodeKubeconfig: issued %v, %v; want the existing file", issued, err)
	}
	if after, _ := os.ReadFile(path); string(after) != string(before) {
		t.Error("second NodeKubeconfig rewrote the file")
	}

	for _, tt := range []struct{ name, dir string }{
		{"no endpoints file (cairn up not running)", stopped},
		{"no PKI", noPKI},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, _, err := NodeKubeconfig(tt.dir, "n1"); err == nil {
				t.Fatal("NodeKubeconfig succeeded")
			}
			if _, err := os.Stat(KubeconfigPath(tt.dir, "n1")); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("kubeconfig: %v, want none", err)
			}
			if _, err := os.Stat(filepath.Join(tt.dir, "pki", pki.CACertFile)); tt.dir == noPKI && !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("a CA was created: %v", err)
			}
		})
	}
}
