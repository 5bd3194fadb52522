package registrar

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/cairn-dev/cairn/services/csi/csiclient"
)

// ErrInvalid is Info's error for a socket whose answer is not a CSI
// plugin the kubelet can use.
var ErrInvalid = errors.New("registrar: invalid plugin")

// CSIVersions are the CSI versions both ends speak.
var CSIVersions = []string{"1.0.0"}

// SocketName is the registration socket's file name for driver.
func SocketName(driver string) string { return driver + "-reg.sock" }

// Config configures Serve.
type Config struct {
	// Dir is the kubelet's plugin registration directory.
	Dir string
	// Driver is the CSI driver's name.
	Driver string
	// Endpoint is the driver's CSI socket (unix:///path or a path), which
	// the kubelet dials once registered.
	Endpoint string
	Log      *slog.Logger
}

// Server is a running registration service.
type Server struct {
	registerapi.UnimplementedRegistrationServer
	cfg      Config
	endpoint string

	mu         sync.Mutex
	registered bool
	lastErr    string
}

var _ registerapi.RegistrationServer = (*Server)(nil)

// GetInfo implements registerapi.RegistrationServer.
func (s *Server) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return &registerapi.PluginInfo{Type: registerapi.CSIPlugin, Name: s.cfg.Driver, Endpoint: s.endpoint,
		SupportedVersions: CSIVersions}, nil
}

// NotifyRegistrationStatus implements registerapi.RegistrationServer: the
// kubelet's verdict, logged and kept (Registered).
func (s *Server) NotifyRegistrationStatus(_ context.Context, st *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	s.mu.Lock()
	s.registered, s.lastErr = st.PluginRegistered, st.Error
	s.mu.Unlock()
	if st.PluginRegistered {
		s.cfg.Log.Info("csi driver registered with the kubelet", "driver", s.cfg.Driver)
	} else {
		s.cfg.Log.Error("the kubelet refused the csi driver", "driver", s.cfg.Driver, "err", st.Error)
	}
	return &registerapi.RegistrationStatusResponse{}, nil
}

// Registered reports the kubelet's last answer: registered, or the error
// it gave ("" before any answer).
func (s *Server) Registered() (bool, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.registered, s.lastErr
}

// New checks cfg and returns the server Serve runs.
func New(cfg Config) (*Server, error) {
	if cfg.Dir == "" || cfg.Driver == "" || cfg.Endpoint == "" {
		return nil, errors.New("registrar: a directory, a driver name and its endpoint are required")
	}
	path, err := csiclient.SocketPath(cfg.Endpoint)
	if err != nil {
		return nil, err
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Server{cfg: cfg, endpoint: path}, nil
}

// Serve serves the registration socket until ctx ends, then removes it
// (the kubelet deregisters the driver when the socket goes). A stale socket
// of the same name is replaced, as node-driver-registrar does.
func (s *Server) Serve(ctx context.Context) error {
	if err := os.MkdirAll(s.cfg.Dir, 0o750); err != nil {
		return fmt.Errorf("registrar: %w", err)
	}
	sock := filepath.Join(s.cfg.Dir, SocketName(s.cfg.Driver))
	if err := os.Remove(sock); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("registrar: remove stale socket: %w", err)
	}
	lis, err := net.Listen("unix", sock)
	if err != nil {
		return fmt.Errorf("registrar: listen: %w", err)
	}
	srv := grpc.NewServer()
	registerapi.RegisterRegistrationServer(srv, s)
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-ctx.Done()
		srv.Stop()
	}()
	err = srv.Serve(lis)
	<-done
	_ = os.Remove(sock)
	if err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return fmt.Errorf("registrar: serve: %w", err)
	}
	return nil
}

// Plugin is what a registration socket says about its CSI driver.
type Plugin struct {
	Name string
	// Endpoint is the path of the driver's CSI socket.
	Endpoint string
	Versions []string
}

// Info asks the registration socket at sock for its plugin (GetInfo) and
// checks it is a CSI plugin with a name, an endpoint and a CSI 1.x
// version, as the kubelet's plugin manager does before its handler
// registers the plugin; the kubelet then tells the plugin the verdict
// (Notify).
func Info(ctx context.Context, sock string) (Plugin, error) {
	conn, err := dial(sock)
	if err != nil {
		return Plugin{}, err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	pi, err := registerapi.NewRegistrationClient(conn).GetInfo(ctx, &registerapi.InfoRequest{})
	if err != nil {
		return Plugin{}, fmt.Errorf("registrar: GetInfo %s: %w", sock, err)
	}
	p := Plugin{Name: pi.GetName(), Endpoint: pi.GetEndpoint(), Versions: pi.GetSupportedVersions()}
	switch {
	case pi.GetType() != registerapi.CSIPlugin:
		return p, fmt.Errorf("%w: %s: type %q, not %s", ErrInvalid, sock, pi.GetType(), registerapi.CSIPlugin)
	case p.Name == "":
		return p, fmt.Errorf("%w: %s: no plugin name", ErrInvalid, sock)
	case p.Endpoint == "":
		return p, fmt.Errorf("%w: %s: plugin %s has no endpoint", ErrInvalid, sock, p.Name)
	case !slices.ContainsFunc(p.Versions, func(v string) bool { return strings.HasPrefix(v, "1.") || v == "1" }):
		return p, fmt.Errorf("%w: %s: plugin %s speaks none of the CSI versions %v (it offers %v)", ErrInvalid, sock, p.Name, CSIVersions, p.Versions)
	}
	return p, nil
}

// Notify tells the plugin at sock whether the kubelet registered it
// (registerErr nil) or why not.
func Notify(ctx context.Context, sock string, registerErr error) error {
	conn, err := dial(sock)
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	st := &registerapi.RegistrationStatus{PluginRegistered: registerErr == nil}
	if registerErr != nil {
		st.Error = registerErr.Error()
	}
	if _, err := registerapi.NewRegistrationClient(conn).NotifyRegistrationStatus(ctx, st); err != nil {
		return fmt.Errorf("registrar: NotifyRegistrationStatus %s: %w", sock, err)
	}
	return nil
}

func dial(sock string) (*grpc.ClientConn, error) {
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithAuthority("localhost"))
	if err != nil {
		return nil, fmt.Errorf("registrar: dial %s: %w", sock, err)
	}
	return conn, nil
}
