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
	"time"
)

func main() {
	ca := flag.String("ca", "", "PEM CA bundle")
	name := flag.String("server-name", "", "name the certificate must cover")
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
	resp, err := hc.Get(flag.Arg(0))
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
