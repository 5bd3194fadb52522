package up

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"github.com/cairn-dev/cairn/services/cairn/cairntest"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"k8s.io/client-go/tools/clientcmd"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// start runs Run in the background and waits until it is up; stop cancels
// it and returns Run's error.
func start(t *testing.T, cfg Config) (out *cairntest.Buffer, stop func() error) {
	t.Helper()
	out = &cairntest.Buffer{}
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	log := slog.New(slog.DiscardHandler)
	go func() { errc <- Run(ctx, log, out, cfg) }()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), "cairn up:") {
		select {
		case err := <-errc:
			cancel()
			t.Fatalf("Run returned early: %v\noutput:\n%s", err, out)
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("not up after 10s; output:\n%s", out)
		}
	}
	return out, func() error {
		cancel()
		return <-errc
	}
}

func TestUpWritesPKIAndKubeconfig(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	cfg := Config{DataDir: dir, Listen: "127.0.0.1:16443", Hosts: []string{"cairn.test"}}
	out, stop := start(t, cfg)

	for _, line := range []string{
		"pki ready (" + filepath.Join(dir, "pki") + ")",
		"kubeconfig written (" + filepath.Join(dir, "kubeconfig") + ")",
	} {
		if !strings.Contains(out.String(), line+"\n") {
			t.Errorf("output lacks %q:\n%s", line, out)
		}
	}

	// The log is ready before the control plane counts as ready, which
	// starts the controller-manager.
	if o := out.String(); !strings.Contains(o, "\nlog ready (") || strings.Index(o, "\nlog ready (") > strings.Index(o, "\ncontroller-manager ready") {
		t.Errorf("want a log ready line before the controller-manager's:\n%s", o)
	}
	id, err := os.ReadFile(filepath.Join(dir, "server-id"))
	if err != nil || len(bytes.TrimSpace(id)) == 0 {
		t.Errorf("server-id: %q, %v", id, err)
	}

	// A second process on the same data directory is refused.
	err = Run(t.Context(), slog.New(slog.DiscardHandler), &bytes.Buffer{}, cfg)
	if !errors.Is(err, ErrLocked) {
		t.Errorf("second Run = %v, want ErrLocked", err)
	}

	if err := stop(); err != nil {
		t.Fatalf("Run after cancel = %v, want nil", err)
	}

	rc, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dir, "kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	if rc.Host != "https://127.0.0.1:16443" {
		t.Errorf("kubeconfig server = %q", rc.Host)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(rc.CAData) {
		t.Fatal("kubeconfig has no CA")
	}
	serving, err := os.ReadFile(filepath.Join(dir, "pki", "apiserver.crt"))
	if err != nil {
		t.Fatal(err)
	}
	leaf := parseCert(t, serving)
	for _, host := range []string{"127.0.0.1", "cairn.test"} {
		if _, err := leaf.Verify(x509.VerifyOptions{DNSName: host, Roots: roots}); err != nil {
			t.Errorf("serving cert for %s against the kubeconfig's CA: %v", host, err)
		}
	}

	// State survives a restart: the same CA, and the lock is free again.
	ca, _ := os.ReadFile(filepath.Join(dir, "pki", "ca.crt"))
	_, stop = start(t, cfg)
	if err := stop(); err != nil {
		t.Fatalf("second start: %v", err)
	}
	again, _ := os.ReadFile(filepath.Join(dir, "pki", "ca.crt"))
	if !bytes.Equal(ca, again) {
		t.Error("CA changed across a restart")
	}
	if again, _ := os.ReadFile(filepath.Join(dir, "server-id")); !bytes.Equal(id, again) {
		t.Errorf("server-id changed across a restart: %q, then %q", id, again)
	}
}

func TestAPIServerURL(t *testing.T) {
	tests := []struct {
		listen   string
		wantURL  string
		wantHost string
		wantErr  bool
	}{
		{listen: "127.0.0.1:6443", wantURL: "https://127.0.0.1:6443", wantHost: "127.0.0.1"},
		{listen: "0.0.0.0:6443", wantURL: "https://127.0.0.1:6443", wantHost: "127.0.0.1"},
		{listen: ":6443", wantURL: "https://127.0.0.1:6443", wantHost: "127.0.0.1"},
		{listen: "[::]:6443", wantURL: "https://127.0.0.1:6443", wantHost: "127.0.0.1"},
		{listen: "[::1]:7443", wantURL: "https://[::1]:7443", wantHost: "::1"},
		{listen: "10.1.2.3:6443", wantURL: "https://10.1.2.3:6443", wantHost: "10.1.2.3"},
		{listen: "localhost:6443", wantURL: "https://localhost:6443", wantHost: "localhost"},
		{listen: "6443", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.listen, func(t *testing.T) {
			url, hosts, err := apiserverURL(tt.listen)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if tt.wantErr {
				return
			}
			if url != tt.wantURL || len(hosts) != 1 || hosts[0] != tt.wantHost {
				t.Errorf("got %q %q, want %q [%q]", url, hosts, tt.wantURL, tt.wantHost)
			}
		})
	}
}

func parseCert(t *testing.T, pemBytes []byte) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(pemBytes)
	if block == nil || block.Type != "CERTIFICATE" {
		t.Fatal("no certificate in PEM")
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
