package hostpath

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cairn-dev/cairn/services/csi/csiclient"
)

const (
	// DriverName is the CSI driver's name (CSIDriver, StorageClass
	// provisioner, PV spec.csi.driver).
	DriverName = "hostpath.csi.cairn.dev"
	// TopologyKey is the topology segment that names the node a volume
	// lives on.
	TopologyKey = "topology.hostpath.csi.cairn.dev/node"
	// ephemeralKey is the volume_context key the kubelet sets for inline
	// volumes when the CSIDriver asks for pod info on mount.
	ephemeralKey = "csi.storage.k8s.io/ephemeral"
	// defaultVolumeSize is the size of a volume whose request names none.
	defaultVolumeSize = 1 << 30
)

// Config configures a driver.
type Config struct {
	// Endpoint is the socket to serve on, unix:///path or a plain path.
	Endpoint string
	// NodeID is this node's id (the Kubernetes node name).
	NodeID string
	// StateDir holds the volumes, snapshots and state.json.
	StateDir string
	// Capacity is the bytes volumes may reserve in total; 0 reserves
	// nothing and reports the state directory's free space.
	Capacity int64
	// MaxVolumesPerNode is NodeGetInfo's max_volumes_per_node (0: no limit).
	MaxVolumesPerNode int64
	// Version is reported by GetPluginInfo.
	Version string
	Log     *slog.Logger
}

// Driver implements the CSI Identity, Controller and Node services.
type Driver struct {
	csi.UnimplementedIdentityServer
	csi.UnimplementedControllerServer
	csi.UnimplementedNodeServer

	cfg Config
	log *slog.Logger

	mu    sync.Mutex
	state *state
}

var (
	_ csi.IdentityServer   = (*Driver)(nil)
	_ csi.ControllerServer = (*Driver)(nil)
	_ csi.NodeServer       = (*Driver)(nil)
)

// New loads (or starts) the driver's state in cfg.StateDir.
func New(cfg Config) (*Driver, error) {
	if cfg.NodeID == "" {
		return nil, errors.New("hostpath: a node id is required")
	}
	if cfg.StateDir == "" {
		return nil, errors.New("hostpath: a state directory is required")
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	for _, d := range []string{cfg.StateDir, filepath.Join(cfg.StateDir, "volumes"), filepath.Join(cfg.StateDir, "snapshots")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("hostpath: %w", err)
		}
	}
	st, err := loadState(filepath.Join(cfg.StateDir, "state.json"))
	if err != nil {
		return nil, err
	}
	return &Driver{cfg: cfg, log: cfg.Log, state: st}, nil
}

// Run serves the driver on cfg.Endpoint until ctx is done; a stale socket
// file is replaced.
func Run(ctx context.Context, cfg Config) error {
	d, err := New(cfg)
	if err != nil {
		return err
	}
	path, err := csiclient.SocketPath(cfg.Endpoint)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("hostpath: %w", err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("hostpath: remove stale socket: %w", err)
	}
	lis, err := net.Listen("unix", path)
	if err != nil {
		return fmt.Errorf("hostpath: listen: %w", err)
	}
	return d.Serve(ctx, lis)
}

// Serve serves the three services on lis until ctx is done, then stops
// gracefully (in-flight calls finish, at most 10 s).
func (d *Driver) Serve(ctx context.Context, lis net.Listener) error {
	srv := grpc.NewServer(grpc.UnaryInterceptor(d.logCall))
	csi.RegisterIdentityServer(srv, d)
	csi.RegisterControllerServer(srv, d)
	csi.RegisterNodeServer(srv, d)
	d.log.Info("csi driver serving", "driver", DriverName, "node", d.cfg.NodeID, "endpoint", lis.Addr().String())
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-ctx.Done()
		stopped := make(chan struct{})
		go func() { srv.GracefulStop(); close(stopped) }()
		select {
		case <-stopped:
		case <-time.After(10 * time.Second):
			srv.Stop()
		}
	}()
	err := srv.Serve(lis)
	<-done
	if err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return fmt.Errorf("hostpath: serve: %w", err)
	}
	return nil
}

// logCall logs each call's method and, on failure, its error.
func (d *Driver) logCall(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	resp, err := handler(ctx, req)
	if err != nil {
		d.log.Debug("csi call failed", "method", info.FullMethod, "err", err)
	} else {
		d.log.Debug("csi call", "method", info.FullMethod)
	}
	return resp, err
}

// save writes the state; callers hold d.mu. A failed write is an Internal
// error of the call that made the change.
func (d *Driver) save() error {
	if err := d.state.save(filepath.Join(d.cfg.StateDir, "state.json")); err != nil {
		return status.Errorf(codes.Internal, "save state: %v", err)
	}
	return nil
}

func (d *Driver) topology() *csi.Topology {
	return &csi.Topology{Segments: map[string]string{TopologyKey: d.cfg.NodeID}}
}
