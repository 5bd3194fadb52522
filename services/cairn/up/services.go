package up

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/cairn-dev/cairn/services/apiserver"
	"github.com/cairn-dev/cairn/services/apiserver/pki"
	"github.com/cairn-dev/cairn/services/controlplane"
	"github.com/cairn-dev/cairn/services/supervisor"
)

// services returns the services `cairn up` runs, in start order: each one
// starts after the one before it is ready and stops before it. Later
// services (controllers, scheduler, kubelet) hold a pointer to the control
// plane service and use its clients from their Run.
func services(cfg Config, paths Paths, p *pki.PKI, log *slog.Logger, out io.Writer) []supervisor.Service {
	cp := &controlPlaneService{cfg: cfg, paths: paths, pki: p, log: log, out: out}
	return []supervisor.Service{cp}
}

// controlPlaneService runs etcd, NATS, the log publisher, the watch hub and
// the apiserver (package controlplane), printing a line as each is ready.
type controlPlaneService struct {
	cfg   Config
	paths Paths
	pki   *pki.PKI
	log   *slog.Logger
	out   io.Writer

	cp *controlplane.ControlPlane
}

func (s *controlPlaneService) Name() string { return "control plane" }

func (s *controlPlaneService) Describe() string {
	if s.cp == nil {
		return ""
	}
	return "https://" + s.cp.Addr
}

func (s *controlPlaneService) Run(ctx context.Context, ready func()) error {
	cp, err := controlplane.Start(ctx, controlplane.Config{
		DataDir:       s.paths.Root,
		EtcdEndpoints: s.cfg.EtcdEndpoints,
		NATSURL:       s.cfg.NATSURL,
		Listen:        s.cfg.Listen,
		TLS:           s.pki.ServerTLSConfig(),
		Authenticator: apiserver.X509Authenticator{},
		OnReady: func(component, detail string) {
			fmt.Fprintf(s.out, "%s ready (%s)\n", component, detail)
		},
		Log: s.log,
	})
	if err != nil {
		return err
	}
	s.cp = cp
	defer cp.Close()
	epPath := filepath.Join(s.paths.Root, EndpointsFile)
	if err := WriteEndpoints(epPath, Endpoints{Etcd: cp.EtcdEndpoints(), NATS: cp.NATSURL(), APIServer: "https://" + cp.Addr}); err != nil {
		return err
	}
	defer os.Remove(epPath)
	ready()
	select {
	case <-ctx.Done():
		return nil
	case err := <-cp.Err():
		return err
	}
}
