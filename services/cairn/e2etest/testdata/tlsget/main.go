// Command tlsget fetches an HTTPS URL verifying the server's certificate
// against a CA file and a server name, and prints the status and the body:
// the e2e test runs it in a pod (busybox's wget cannot handshake with a
// server that asks for client certificates, as the apiserver does).
package main

import (
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

func main() {
	ca := flag.String("ca", "", "PEM CA bundle")
	name := flag.String("server-name", "", "name the certificate must cover")
	tokenFile := flag.String("token-file", "", "bearer token to send, e.g. the pod's service-account token")
	flag.Parse()
	pem, err := os.ReadFile(*ca)
	if err != nil {
		fail(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		fail(fmt.Errorf("no certificate in %s", *ca))
	}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: *name}}}
	req, err := http.NewRequest(http.MethodGet, flag.Arg(0), nil)
	if err != nil {
		fail(err)
	}
	if *tokenFile != "" {
		token, err := os.ReadFile(*tokenFile)
		if err != nil {
			fail(err)
		}
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	}
	resp, err := hc.Do(req)
	if err != nil {
		fail(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Printf("%d\n%s\n", resp.StatusCode, body)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "tlsget:", err)
	os.Exit(1)
}
