package apitest

import (
	"crypto/tls"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
)

// TestHTTP2 checks that the apiserver speaks HTTP/2 over TLS, as
// Kubernetes does: client-go's transport negotiates it and runs 100
// concurrent requests over one TLS connection, not one handshake each.
func TestHTTP2(t *testing.T) {
	env := controlplanetest.Start(t, controlplanetest.Options{TLS: true})
	var handshakes atomic.Int32
	cfg := rest.CopyConfig(env.Config)
	tlsCfg, err := rest.TLSConfigFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tlsCfg.VerifyConnection = func(tls.ConnectionState) error {
		handshakes.Add(1)
		return nil
	}
	tr := &http.Transport{TLSClientConfig: tlsCfg, ForceAttemptHTTP2: true}
	defer tr.CloseIdleConnections()
	rt, err := rest.HTTPWrappersForConfig(cfg, tr)
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: rt}

	get := func() (string, error) {
		resp, err := hc.Get(cfg.Host + "/api/v1/namespaces/default/pods")
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET pods: %s", resp.Status)
		}
		return resp.Proto, nil
	}
	// The first request opens the connection; the others share it.
	if proto, err := get(); err != nil || proto != "HTTP/2.0" {
		t.Fatalf("GET over TLS: proto %q, err %v; want HTTP/2.0", proto, err)
	}
	var wg sync.WaitGroup
	for range 100 {
		wg.Go(func() {
			if proto, err := get(); err != nil || proto != "HTTP/2.0" {
				t.Errorf("GET: proto %q, err %v", proto, err)
			}
		})
	}
	wg.Wait()
	if n := handshakes.Load(); n != 1 {
		t.Errorf("101 requests took %d TLS handshakes, want 1 (one HTTP/2 connection)", n)
	}
}
