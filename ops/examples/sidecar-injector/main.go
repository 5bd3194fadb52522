// Command sidecar-injector is cairn's second example: an admission webhook
// that injects a logging sidecar into pods labelled sidecar-inject=true
// (package inject).
//
//	sidecar-injector serve --cert tls.crt --key tls.key [--addr :8443]
//	sidecar-injector manifest [--pki .cairn/pki]   # the example's YAML, with a serving cert from the cluster CA
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/cairn-dev/cairn/ops/examples/sidecar-injector/inject"
	"github.com/cairn-dev/cairn/services/pki"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "sidecar-injector:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return errors.New("usage: sidecar-injector serve|manifest [flags]")
	}
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	switch args[0] {
	case "serve":
		addr := fs.String("addr", ":8443", "listen address")
		cert := fs.String("cert", "tls.crt", "serving certificate")
		key := fs.String("key", "tls.key", "serving key")
		image := fs.String("sidecar-image", inject.DefaultImage, "image of the sidecar")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		return serve(*addr, *cert, *key, inject.Injector{Image: *image})
	case "manifest":
		dir := fs.String("pki", ".cairn/pki", "the cluster's PKI directory (cairn up's <data-dir>/pki)")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		ca, err := pki.LoadCA(*dir)
		if err != nil {
			return err
		}
		out, err := inject.ManifestFor(ca)
		if err != nil {
			return err
		}
		_, err = os.Stdout.Write(out)
		return err
	}
	return fmt.Errorf("unknown command %q (serve, manifest)", args[0])
}

func serve(addr, certFile, keyFile string, in inject.Injector) error {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	srv := &http.Server{Addr: addr, Handler: in.Handler(), ReadHeaderTimeout: 10 * time.Second,
		TLSConfig: &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}}
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServeTLS("", "") }()
	log.Info("serving", "addr", addr)
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return srv.Shutdown(sctx)
}
