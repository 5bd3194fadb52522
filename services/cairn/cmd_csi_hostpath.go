package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/cairn-dev/cairn/services/csi/hostpath"
	"github.com/cairn-dev/cairn/services/csi/registrar"
)

// runCSIHostpath is the CSI driver hostpath.csi.cairn.dev as its own
// process: `cairn csi-hostpath --endpoint unix:///path/csi.sock --node-id N
// --state-dir D`. cairn up runs the same driver next to its node.
func runCSIHostpath(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cfg hostpath.Config
	var regDir string
	fs := newFlagSet("csi-hostpath", stderr)
	fs.describe("csi-hostpath --endpoint unix:///path/csi.sock --node-id NODE --state-dir DIR [flags]",
		"Serve the CSI driver "+hostpath.DriverName+" (Identity, Controller and Node services) on a unix socket;\nits volumes are directories under the state directory.")
	fs.StringVar(&cfg.Endpoint, "endpoint", "", "the socket to serve on (unix:///path or a path)")
	fs.StringVar(&cfg.NodeID, "node-id", "", "this node's id, the Kubernetes node name (default: the host name)")
	fs.StringVar(&cfg.StateDir, "state-dir", "", "the directory of the volumes, snapshots and state.json")
	fs.Int64Var(&cfg.Capacity, "capacity", 0, "bytes the volumes may reserve in total (0: no reservation; GetCapacity reports the state directory's free space)")
	fs.Int64Var(&cfg.MaxVolumesPerNode, "max-volumes-per-node", 0, "volumes that may be attached to this node (0: no limit)")
	fs.StringVar(&regDir, "kubelet-registration-dir", "", "the kubelet's plugin registration directory (its root dir's plugins_registry): serve the registration socket there, as node-driver-registrar, so the kubelet registers the driver")
	fs.logLevelFlag()
	if help, err := fs.parse(args); help || err != nil {
		return err
	}
	if cfg.NodeID == "" {
		h, err := os.Hostname()
		if err != nil {
			return fmt.Errorf("node id: %w", err)
		}
		cfg.NodeID = h
	}
	if cfg.Endpoint == "" || cfg.StateDir == "" {
		fmt.Fprintln(stderr, "cairn csi-hostpath: --endpoint and --state-dir are required")
		fs.Usage()
		return errUsage
	}
	log, err := fs.logger(stderr)
	if err != nil {
		return err
	}
	cfg.Log, cfg.Version = log, versionString()
	fmt.Fprintf(stdout, "CSI driver %s serving on %s (node %s)\n", hostpath.DriverName, cfg.Endpoint, cfg.NodeID)
	if regDir == "" {
		return hostpath.Run(ctx, cfg)
	}
	reg, err := registrar.New(registrar.Config{Dir: regDir, Driver: hostpath.DriverName, Endpoint: cfg.Endpoint, Log: log})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- reg.Serve(ctx) }()
	err = hostpath.Run(ctx, cfg)
	cancel()
	return errors.Join(err, <-errc)
}
