package cairntest

import (
	"encoding/base64"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// WithToken is a kubectl that authenticates with a bearer token only: a
// kubeconfig with k's server and CA and no client certificate.
func (k *Kubectl) WithToken(t testing.TB, token string) *Kubectl {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(k.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	ctx, ok := cfg.Contexts[cfg.CurrentContext]
	if !ok {
		t.Fatalf("kubeconfig %s has no current context", k.Kubeconfig)
	}
	cfg.AuthInfos = map[string]*clientcmdapi.AuthInfo{"token": {Token: token}}
	ctx.AuthInfo = "token"
	path := filepath.Join(t.TempDir(), "token.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	c := *k
	c.Kubeconfig = path
	return &c
}

// JWTClaims decodes a JWT's payload without verifying it.
func JWTClaims(t testing.TB, token string) map[string]any {
	t.Helper()
	parts := strings.Split(strings.TrimSpace(token), ".")
	if len(parts) != 3 {
		t.Fatalf("not a JWT: %q", token)
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatalf("JWT payload: %v", err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("JWT payload: %v", err)
	}
	return m
}
