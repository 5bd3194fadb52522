package clitest

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/services/cairn/cairntest"
	"github.com/cairn-dev/cairn/services/netns"
	"github.com/cairn-dev/cairn/services/netns/netnstest"
)

// testProxy runs `cairn proxy` alone, as the README says, for a node whose
// network namespace the test made: with credentials issued from the PKI
// (system:kube-proxy) it programs the namespace's nftables, so that from
// inside the namespace https://10.96.0.1 is the apiserver (through the
// proxy's relay, with a certificate for kubernetes.default.svc), and it
// serves its metrics.
func (c *cluster) testProxy(t *testing.T) {
	ns := netnstest.New(t, "nft")
	metrics := cairntest.FreeAddr(t)
	p := cairntest.NewProc(t, "proxy", c.bin, "proxy", "--data-dir", c.dir, "--node-name", "px", "--netns", ns, "--metrics-bind-address", metrics)
	p.Start()
	ca, err := os.ReadFile(filepath.Join(c.dir, "pki", "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	inNS := &http.Client{Transport: &http.Transport{DialContext: netns.Dialer(ns),
		TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "kubernetes.default.svc"}}}
	defer inNS.CloseIdleConnections()
	c.eventually(t, "https://10.96.0.1/version from inside the node's namespace", func() error {
		p.Alive()
		body, err := get(inNS, "https://10.96.0.1/version")
		if err == nil && !strings.Contains(body, `"gitVersion"`) {
			err = fmt.Errorf("body %q", body)
		}
		return err
	})
	if out := p.Output(); !strings.Contains(out, "proxy credentials issued") {
		t.Errorf("proxy output lacks the issued credentials:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(c.dir, "nodes", "px", "proxy.kubeconfig")); err != nil {
		t.Errorf("the proxy's kubeconfig: %v", err)
	}
	body, err := get(http.DefaultClient, "http://"+metrics+"/metrics")
	if err != nil || !strings.Contains(body, "kubeproxy_sync_proxy_rules_duration_seconds") || !strings.Contains(body, "cairn_proxy_rules_programmed") {
		t.Errorf("metrics: %v\n%s", err, body)
	}
	p.Interrupt(stopTimeout)
}

func get(hc *http.Client, url string) (string, error) {
	resp, err := hc.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return string(b), fmt.Errorf("%s: %s", url, resp.Status)
	}
	return string(b), err
}
