package scaleouttest

import (
	"fmt"
	"io"
	stdlog "log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// The identities the apiserver knows: the test's admin (the user and the
// kubelet) and the controller manager, whose writes the log must name.
const (
	adminToken     = "admin-token"
	controllerUser = "system:kube-controller-manager"
	controllerTok  = "cm-token"
)

// writeTokens writes the apiserver's token file.
func writeTokens(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "tokens.csv")
	lines := fmt.Sprintf("%s,admin,1,%q\n%s,%s,2,\"\"\n", adminToken, "system:masters", controllerTok, controllerUser)
	if err := os.WriteFile(path, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// tokenProxy serves a loopback proxy to the apiserver at addr that adds
// the bearer token to every request and returns its address: client-go
// applies a kubeconfig's credentials only over TLS, and the children talk
// plain HTTP to the apiserver.
func tokenProxy(t *testing.T, addr, token string) string {
	t.Helper()
	rp := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: addr})
	rp.FlushInterval = -1 // watches
	rp.ErrorLog = stdlog.New(io.Discard, "", 0)
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		r.Header.Set("Authorization", "Bearer "+token)
		rp.ServeHTTP(rw, r)
	}))
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

// writeKubeconfig writes a kubeconfig that reaches the apiserver at addr
// over plain HTTP with a bearer token (which client-go does not send over
// plain HTTP; see tokenProxy).
func writeKubeconfig(t *testing.T, dir, addr, token string) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["cairn"] = &clientcmdapi.Cluster{Server: "http://" + addr}
	cfg.AuthInfos["cm"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["cairn"] = &clientcmdapi.Context{Cluster: "cairn", AuthInfo: "cm"}
	cfg.CurrentContext = "cairn"
	path := filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}
