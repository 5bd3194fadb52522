package kubelet

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// listen opens the HTTPS server's listener (if configured) so that its port
// can go in the node status before the node registers.
func (k *Kubelet) listen() error {
	ln := k.cfg.ServerListener
	if ln == nil && k.cfg.ServerAddr != "" {
		var err error
		if ln, err = net.Listen("tcp", k.cfg.ServerAddr); err != nil {
			return fmt.Errorf("kubelet: listen: %w", err)
		}
	}
	if ln == nil {
		return nil
	}
	k.listener = ln
	if a, ok := ln.Addr().(*net.TCPAddr); ok {
		k.port = int32(a.Port)
	}
	return nil
}

func (k *Kubelet) closeListener() {
	if k.listener != nil {
		k.listener.Close()
	}
}

// serve runs the HTTPS server until ctx ends. Clients authenticate with a
// certificate from Config.ClientCAs (verified if given, so that a request
// without one reaches withAuth and gets the kubelet's 401, not a failed
// handshake).
func (k *Kubelet) serve(ctx context.Context) error {
	var tlsCfg *tls.Config
	if k.cfg.ServerTLS != nil {
		tlsCfg = k.cfg.ServerTLS.Clone()
	} else {
		cert, err := selfSigned(k.cfg.NodeName, k.nodeIP, k.now())
		if err != nil {
			k.closeListener()
			return fmt.Errorf("kubelet: serving certificate: %w", err)
		}
		tlsCfg = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	if k.cfg.ClientCAs != nil {
		tlsCfg.ClientCAs = k.cfg.ClientCAs
		tlsCfg.ClientAuth = tls.VerifyClientCertIfGiven
	} else if tlsCfg.ClientCAs == nil {
		k.log.Warn("kubelet API: no client CAs, every request for logs or exec is refused (401)")
	}
	srv := &http.Server{Handler: k.withAuth(k.handler()), TLSConfig: tlsCfg, ReadHeaderTimeout: 10 * time.Second,
		// Refused handshakes (a client certificate of another CA) are
		// the client's problem: debug, not the standard logger.
		ErrorLog:    slog.NewLogLogger(k.log.Handler(), slog.LevelDebug),
		BaseContext: func(net.Listener) context.Context { return ctx }}
	done := make(chan error, 1)
	go func() { done <- srv.ServeTLS(k.listener, "", "") }()
	select {
	case err := <-done:
		return fmt.Errorf("kubelet: serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close()
	}
	if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("kubelet: serve: %w", err)
	}
	return nil
}
