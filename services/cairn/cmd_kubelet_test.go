package main

import (
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/cairn-dev/cairn/services/apiserver/kubeconfig"
	"github.com/cairn-dev/cairn/services/pki"
)

// TestKubeletClientCAs: --client-ca-file wins; without it the CA of the
// kubeconfig (inline data or a file) verifies the kubelet's clients; with
// neither there is no pool (the kubelet then refuses everyone).
func TestKubeletClientCAs(t *testing.T) {
	dir := t.TempDir()
	cluster, err := pki.Load(filepath.Join(dir, "cluster"), nil)
	if err != nil {
		t.Fatal(err)
	}
	other, err := pki.Load(filepath.Join(dir, "other"), nil)
	if err != nil {
		t.Fatal(err)
	}
	// A kubeconfig as cairn up writes it (certificate-authority-data).
	kc := filepath.Join(dir, "kubelet.kubeconfig")
	if err := kubeconfig.Write(kc, "https://127.0.0.1:6443", cluster.CAPEM, cluster.AdminCertPEM, cluster.AdminKeyPEM, pki.AdminUser); err != nil {
		t.Fatal(err)
	}
	withData, err := clientcmd.BuildConfigFromFlags("", kc)
	if err != nil {
		t.Fatal(err)
	}
	if len(withData.TLSClientConfig.CAData) == 0 {
		t.Fatal("kubeconfig has no certificate-authority-data")
	}
	withFile := &rest.Config{TLSClientConfig: rest.TLSClientConfig{CAFile: filepath.Join(cluster.Dir, pki.CACertFile)}}
	otherCA := filepath.Join(other.Dir, pki.CACertFile)
	bad := filepath.Join(dir, "bad.pem")
	if err := os.WriteFile(bad, []byte("not PEM"), 0o600); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name    string
		file    string
		rc      *rest.Config
		want    *pki.PKI // whose CA the pool must hold; nil: no pool
		wantErr bool
	}{
		{name: "kubeconfig certificate-authority-data", rc: withData, want: cluster},
		{name: "kubeconfig certificate-authority file", rc: withFile, want: cluster},
		{name: "flag wins over the kubeconfig", file: otherCA, rc: withData, want: other},
		{name: "no CA anywhere", rc: &rest.Config{}},
		{name: "flag file missing", file: filepath.Join(dir, "nope.pem"), rc: withData, wantErr: true},
		{name: "flag file not PEM", file: bad, rc: withData, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pool, err := kubeletClientCAs(tt.file, tt.rc)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if tt.want == nil {
				if pool != nil {
					t.Errorf("pool = %v, want none", pool)
				}
				return
			}
			if pool == nil {
				t.Fatal("no pool")
			}
			for _, p := range []*pki.PKI{cluster, other} {
				cert, err := x509.ParseCertificate(p.KubeletClient.Certificate[0])
				if err != nil {
					t.Fatal(err)
				}
				_, verr := cert.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
				if got, want := verr == nil, p == tt.want; got != want {
					t.Errorf("client cert of %s verifies = %v, want %v", filepath.Base(p.Dir), got, want)
				}
			}
		})
	}
}
