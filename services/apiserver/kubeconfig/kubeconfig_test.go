package kubeconfig

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
)

func TestWriteLoads(t *testing.T) {
	ca := []byte("-----BEGIN CERTIFICATE-----\nY2E=\n-----END CERTIFICATE-----\n")
	cert := []byte("-----BEGIN CERTIFICATE-----\nY2VydA==\n-----END CERTIFICATE-----\n")
	key := []byte("-----BEGIN EC PRIVATE KEY-----\na2V5\n-----END EC PRIVATE KEY-----\n")
	path := filepath.Join(t.TempDir(), "sub", "kubeconfig")

	// Written twice: the second write replaces the first.
	if err := Write(path, "https://10.0.0.1:6443", ca, cert, key, "someone"); err != nil {
		t.Fatal(err)
	}
	if err := Write(path, "https://127.0.0.1:6443", ca, cert, key, "cairn-admin"); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("mode = %v, want 0600", st.Mode().Perm())
	}

	cfg, err := clientcmd.LoadFromFile(path)
	if err != nil {
		t.Fatalf("LoadFromFile: %v", err)
	}
	if cfg.CurrentContext != ContextName {
		t.Errorf("current context = %q, want %q", cfg.CurrentContext, ContextName)
	}
	if len(cfg.Clusters) != 1 || len(cfg.AuthInfos) != 1 || len(cfg.Contexts) != 1 {
		t.Errorf("got %d clusters, %d users, %d contexts; want one each", len(cfg.Clusters), len(cfg.AuthInfos), len(cfg.Contexts))
	}

	// The path clients take: build a rest.Config from the file.
	rc, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatalf("BuildConfigFromFlags: %v", err)
	}
	tests := []struct {
		name      string
		got, want []byte
	}{
		{"CA", rc.CAData, ca},
		{"cert", rc.CertData, cert},
		{"key", rc.KeyData, key},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !bytes.Equal(tt.got, tt.want) {
				t.Errorf("got %q, want %q", tt.got, tt.want)
			}
		})
	}
	if rc.Host != "https://127.0.0.1:6443" {
		t.Errorf("host = %q", rc.Host)
	}
	if got := cfg.Contexts[ContextName].AuthInfo; got != "cairn-admin" {
		t.Errorf("context user = %q, want cairn-admin", got)
	}
}

func TestWriteRejectsEmpty(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := Write(path, "", nil, nil, nil, "u"); err == nil {
		t.Error("Write with empty server succeeded")
	}
	if err := Write(path, "https://x", nil, nil, nil, ""); err == nil {
		t.Error("Write with empty user succeeded")
	}
}

// TestRewriteNeverEmpty: a reader of a kubeconfig that is written again
// (a server restarting on its data directory) always loads a whole one;
// a write in place (truncate, then write) let client-go read an empty
// file ("invalid configuration: no configuration has been provided").
func TestRewriteNeverEmpty(t *testing.T) {
	ca := []byte("-----BEGIN CERTIFICATE-----\nY2E=\n-----END CERTIFICATE-----\n")
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := WriteCertFile(path, "https://127.0.0.1:6443", ca, "/c.pem", "u"); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 300 {
			if err := WriteCertFile(path, "https://127.0.0.1:6443", ca, "/c.pem", "u"); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	reads := 0
	for {
		select {
		case <-done:
			t.Logf("%d reads during 300 writes", reads)
			if leftovers, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".kubeconfig.*")); len(leftovers) > 0 {
				t.Errorf("temporary files left: %v", leftovers)
			}
			return
		default:
		}
		cfg, err := clientcmd.LoadFromFile(path)
		if err != nil || cfg.CurrentContext != ContextName {
			t.Fatalf("read %d while the file is written again: %v (current context %q)", reads, err, cfg.CurrentContext)
		}
		reads++
	}
}
