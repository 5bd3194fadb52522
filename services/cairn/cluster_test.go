package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/services/apiserver/kubeconfig"
	"github.com/cairn-dev/cairn/services/embedded/endpoints"
	"github.com/cairn-dev/cairn/services/pki"
)

// TestFindCluster: the kubeconfig and the endpoints file each command
// uses, by the rules of cluster.go, for every way of naming them.
func TestFindCluster(t *testing.T) {
	p, err := pki.Load(filepath.Join(t.TempDir(), "pki"), nil)
	if err != nil {
		t.Fatal(err)
	}
	// Two data directories of cairn up, each with its kubeconfig and its
	// endpoints file, and a kubeconfig that only picks a context.
	dataDir := func(server string) string {
		d := t.TempDir()
		if err := kubeconfig.Write(filepath.Join(d, "kubeconfig"), server, p.CAPEM, p.AdminCertPEM, p.AdminKeyPEM, pki.AdminUser); err != nil {
			t.Fatal(err)
		}
		if err := endpoints.Write(endpoints.Path(d), endpoints.Set{NATS: "nats://" + server, APIServer: server}); err != nil {
			t.Fatal(err)
		}
		return d
	}
	a, b := dataDir("https://a:6443"), dataDir("https://b:6443")
	picker := filepath.Join(t.TempDir(), "picker")
	if err := os.WriteFile(picker, []byte("apiVersion: v1\nkind: Config\ncurrent-context: cairn\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// cwd holds a ./.cairn, the default data directory.
	cwd := t.TempDir()
	if err := os.Symlink(b, filepath.Join(cwd, ".cairn")); err != nil {
		t.Fatal(err)
	}
	t.Chdir(cwd)
	list := func(files ...string) string { return strings.Join(files, string(filepath.ListSeparator)) }

	tests := []struct {
		name       string
		service    string // the service's kubeconfig file; empty: a command users run
		env        string // KUBECONFIG
		args       []string
		wantServer string
		wantNATS   string
	}{
		{name: "default data dir", wantServer: "https://b:6443", wantNATS: "nats://https://b:6443"},
		{name: "KUBECONFIG", env: filepath.Join(a, "kubeconfig"), wantServer: "https://a:6443", wantNATS: "nats://https://a:6443"},
		{name: "KUBECONFIG list, merged: the endpoints next to the cluster's file", env: list(filepath.Join(a, "missing"), picker, filepath.Join(a, "kubeconfig")),
			wantServer: "https://a:6443", wantNATS: "nats://https://a:6443"},
		{name: "KUBECONFIG list: the first file wins", env: list(filepath.Join(b, "kubeconfig"), filepath.Join(a, "kubeconfig")),
			wantServer: "https://b:6443", wantNATS: "nats://https://b:6443"},
		{name: "--kubeconfig over KUBECONFIG", env: filepath.Join(b, "kubeconfig"), args: []string{"--kubeconfig", filepath.Join(a, "kubeconfig")},
			wantServer: "https://a:6443", wantNATS: "nats://https://a:6443"},
		{name: "--data-dir over KUBECONFIG", env: filepath.Join(b, "kubeconfig"), args: []string{"--data-dir", a},
			wantServer: "https://a:6443", wantNATS: "nats://https://a:6443"},
		{name: "--kubeconfig with --data-dir: the endpoints of the data dir", args: []string{"--kubeconfig", filepath.Join(a, "kubeconfig"), "--data-dir", b},
			wantServer: "https://a:6443", wantNATS: "nats://https://b:6443"},
		{name: "--nats-url over the endpoints file", env: filepath.Join(a, "kubeconfig"), args: []string{"--nats-url", "nats://flag"},
			wantServer: "https://a:6443", wantNATS: "nats://flag"},
		{name: "service: KUBECONFIG is not read", service: "kubeconfig", env: filepath.Join(a, "kubeconfig"),
			wantServer: "https://b:6443", wantNATS: "nats://https://b:6443"},
		{name: "service: --kubeconfig, endpoints next to it", service: "kubeconfig", args: []string{"--kubeconfig", filepath.Join(a, "kubeconfig")},
			wantServer: "https://a:6443", wantNATS: "nats://https://a:6443"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("KUBECONFIG", tt.env)
			fs := newFlagSet("test", io.Discard)
			if tt.service != "" {
				fs.serviceFlags(tt.service, "")
			} else {
				fs.clientFlags()
				fs.logFlags(false)
			}
			if _, err := fs.parse(tt.args); err != nil {
				t.Fatal(err)
			}
			rc, err := fs.restConfig()
			if err != nil {
				t.Fatal(err)
			}
			if rc.Host != tt.wantServer {
				t.Errorf("server = %q, want %q", rc.Host, tt.wantServer)
			}
			ep, err := fs.endpoints()
			if err != nil {
				t.Fatal(err)
			}
			if ep.NATS != tt.wantNATS {
				t.Errorf("NATS = %q, want %q", ep.NATS, tt.wantNATS)
			}
		})
	}
}
