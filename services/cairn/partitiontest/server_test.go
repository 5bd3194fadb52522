package partitiontest

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/logger"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cairn-dev/cairn/services/apiserver"
	"github.com/cairn-dev/cairn/services/controlplane"
	"github.com/cairn-dev/cairn/services/embedded"
)

// The ports every server listens on, on its host's address.
const (
	etcdClientPort = "2379"
	etcdPeerPort   = "2380"
	natsPort       = 4222
	natsRoutePort  = 6222
	apiPort        = "6443"
	adminToken     = "partitiontest-admin-token"
)

// serverConfig is what a server child runs, passed as JSON in -partitiontest.server.
type serverConfig struct {
	Name string
	Addr string // the host's address
	Dir  string
	// First is the address of the server whose etcd a new member joins
	// through; "" starts the cluster.
	First string
	// All is every server's address (NATS routes).
	All []string
}

var serverFlag = flag.String("partitiontest.server", "", "run as a test server child with this JSON config")

func TestMain(m *testing.M) {
	flag.Parse()
	if *serverFlag != "" {
		var cfg serverConfig
		if err := json.Unmarshal([]byte(*serverFlag), &cfg); err != nil {
			fmt.Fprintln(os.Stderr, "partitiontest server:", err)
			os.Exit(2)
		}
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
		err := runServer(ctx, cfg)
		stop()
		if err != nil {
			fmt.Fprintln(os.Stderr, "partitiontest server:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// runServer runs one server until ctx ends: its etcd member, its NATS
// server and the control plane on them.
func runServer(ctx context.Context, cfg serverConfig) error {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})).With("server", cfg.Name)
	peerURL := "http://" + net.JoinHostPort(cfg.Addr, etcdPeerPort)
	ec := embedded.EtcdConfig{Dir: filepath.Join(cfg.Dir, "etcd"), Name: cfg.Name, NoFsync: true,
		ClientAddr: net.JoinHostPort(cfg.Addr, etcdClientPort), PeerAddr: net.JoinHostPort(cfg.Addr, etcdPeerPort)}
	var (
		joinCli *clientv3.Client
		id      uint64
	)
	_, statErr := os.Stat(filepath.Join(ec.Dir, "member"))
	if cfg.First != "" && errors.Is(statErr, os.ErrNotExist) {
		var err error
		joinCli, err = clientv3.New(clientv3.Config{Endpoints: []string{"http://" + net.JoinHostPort(cfg.First, etcdClientPort)}, DialTimeout: 5 * time.Second})
		if err != nil {
			return err
		}
		defer joinCli.Close()
		if ec.InitialCluster, id, err = embedded.JoinEtcd(ctx, joinCli, cfg.Name, peerURL); err != nil {
			return fmt.Errorf("join etcd: %w", err)
		}
	}
	etcd, err := embedded.StartEtcd(ctx, ec)
	if err != nil {
		return err
	}
	defer etcd.Close()
	if joinCli != nil {
		if err := embedded.PromoteEtcd(ctx, joinCli, id); err != nil {
			return fmt.Errorf("promote etcd member: %w", err)
		}
	}
	fmt.Println("etcd ready")
	var routes []string
	for _, a := range cfg.All {
		routes = append(routes, fmt.Sprintf("nats-route://%s:%d", a, natsRoutePort))
	}
	n, err := embedded.StartNATS(embedded.NATSConfig{StoreDir: filepath.Join(cfg.Dir, "nats"), Host: cfg.Addr, Port: natsPort, Name: cfg.Name,
		Cluster: embedded.NATSCluster{Name: "cairn-ha", Port: natsRoutePort, Routes: routes}})
	if err != nil {
		return err
	}
	defer n.Close()
	if os.Getenv("CAIRN_TEST_NATS_LOG") != "" {
		n.Server().SetLogger(logger.NewTestLogger("["+cfg.Name+"] ", true), false, false)
	}
	fmt.Println("nats ready")
	// The streams get 3 replicas: wait for JetStream's meta group to know
	// every server.
	for {
		jsz, err := n.Server().Jsz(nil)
		if err == nil && jsz.Meta != nil && jsz.Meta.Leader != "" && jsz.Meta.Size >= len(cfg.All) {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	fmt.Println("jetstream meta ready")
	startCtx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	cp, err := controlplane.Start(startCtx, controlplane.Config{
		EtcdEndpoints:  []string{etcd.Endpoint()},
		NATSURL:        n.URL(),
		StreamReplicas: 3,
		Listen:         net.JoinHostPort(cfg.Addr, apiPort),
		Authenticator: apiserver.TokenAuthenticator{
			adminToken: {User: "admin", Groups: []string{apiserver.GroupMasters}},
		},
		Identity:    cfg.Name,
		ElectionTTL: 2 * time.Second,
		Log:         log,
	})
	if err != nil {
		return fmt.Errorf("control plane: %w", err)
	}
	defer cp.Close()
	fmt.Println("apiserver ready")
	select {
	case <-ctx.Done():
		return nil
	case err := <-cp.Err():
		return err
	}
}
