package embedded

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3client"
	"go.uber.org/zap"
)

// EtcdConfig configures an embedded etcd member.
type EtcdConfig struct {
	// Dir is the member's data directory.
	Dir string
	// ClientAddr is host:port for clients; "" picks a free loopback port.
	ClientAddr string
	// NoFsync trades durability for speed; only for tests and benchmarks
	// that measure something other than the disk.
	NoFsync bool
	// Name is the member's name, unique in its cluster; "" is "cairn".
	Name string
	// PeerAddr is host:port for the other members; "" picks a free
	// loopback port.
	PeerAddr string
	// InitialCluster is etcd's --initial-cluster (name=peerURL,...) of a
	// member that joins an existing cluster (see JoinEtcd); "" starts a new
	// cluster of this one member. Ignored once the data directory holds a
	// member: a restart rejoins with what it recorded.
	InitialCluster string
	// NoListen opens no port at all (ClientAddr is ignored): the member is
	// reached only through InProcessClient, e.g. to rebuild a data
	// directory that a listening member serves later.
	NoListen bool
}

// Etcd is a running embedded etcd member.
type Etcd struct {
	e        *embed.Etcd
	endpoint string
}

// MaxRequestBytes is the largest etcd request cairn makes: a 3 MiB object
// plus its transaction metadata, with room to spare.
const MaxRequestBytes = 8 << 20

// StartEtcd starts a member and waits until it serves. Stop it with Close.
func StartEtcd(ctx context.Context, cfg EtcdConfig) (*Etcd, error) {
	ec := embed.NewConfig()
	ec.Name = "cairn"
	if cfg.Name != "" {
		ec.Name = cfg.Name
	}
	ec.Dir = filepath.Clean(cfg.Dir)
	ec.LogLevel = "error"
	// etcd's zap logger reports normal shutdown as errors; cairn logs what
	// matters itself.
	ec.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	// cairn compacts itself, never past the last published revision; see
	// publish.Compactor.
	ec.AutoCompactionRetention = "0"
	ec.MaxRequestBytes = MaxRequestBytes
	ec.QuotaBackendBytes = 8 << 30
	ec.UnsafeNoFsync = cfg.NoFsync
	ec.WarningApplyDuration = time.Second

	// A port picked free may be taken before etcd listens on it (by
	// another process picking ports the same way); pick again.
	var (
		cu  url.URL
		e   *embed.Etcd
		err error
	)
	for attempt := 1; ; attempt++ {
		if cu, err = listenOn(ec, cfg); err != nil {
			return nil, err
		}
		e, err = embed.StartEtcd(ec)
		if err == nil {
			break
		}
		if attempt == 5 || !isAddrInUse(err) {
			return nil, fmt.Errorf("embedded: start etcd: %w", err)
		}
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("embedded: etcd: %w", err)
	case <-ctx.Done():
		e.Close()
		return nil, fmt.Errorf("embedded: etcd: %w", ctx.Err())
	case <-time.After(60 * time.Second):
		e.Server.Stop()
		e.Close()
		return nil, errors.New("embedded: etcd did not become ready in 60s")
	}
	ep := ""
	if !cfg.NoListen {
		ep = cu.String()
	}
	return &Etcd{e: e, endpoint: ep}, nil
}

// PeerURL is the URL the other members reach this one on; "" with NoListen.
func (e *Etcd) PeerURL() string {
	if len(e.e.Config().AdvertisePeerUrls) == 0 || e.endpoint == "" {
		return ""
	}
	u := e.e.Config().AdvertisePeerUrls[0]
	return u.String()
}

// Endpoint is the client URL, e.g. http://127.0.0.1:2379; "" with NoListen.
func (e *Etcd) Endpoint() string { return e.endpoint }

// InProcessClient returns a client that calls the member's KV, watch and
// lease APIs directly, without gRPC or a socket. Close it before the member.
func (e *Etcd) InProcessClient() *clientv3.Client { return v3client.New(e.e.Server) }

// Err reports a fatal error of the running member.
func (e *Etcd) Err() <-chan error { return e.e.Err() }

// Close stops the member and waits for it.
func (e *Etcd) Close() { e.e.Close() }

// listenOn sets the member's client and peer URLs: a free peer port, and
// cfg.ClientAddr or a free client port. It returns the client URL. With
// NoListen there are none to listen on: the single-member cluster needs a
// peer URL, which is recorded, never listened on.
func listenOn(ec *embed.Config, cfg EtcdConfig) (url.URL, error) {
	if cfg.NoListen {
		pu := url.URL{Scheme: "http", Host: "127.0.0.1:2380"}
		ec.ListenClientUrls, ec.AdvertiseClientUrls, ec.ListenPeerUrls = nil, nil, nil
		ec.AdvertisePeerUrls = []url.URL{pu}
		ec.InitialCluster = ec.Name + "=" + pu.String()
		return url.URL{}, nil
	}
	clientAddr := cfg.ClientAddr
	if clientAddr == "" {
		a, err := freeAddr()
		if err != nil {
			return url.URL{}, fmt.Errorf("embedded: etcd client port: %w", err)
		}
		clientAddr = a
	}
	peerAddr := cfg.PeerAddr
	if peerAddr == "" {
		a, err := freeAddr()
		if err != nil {
			return url.URL{}, fmt.Errorf("embedded: etcd peer port: %w", err)
		}
		peerAddr = a
	}
	cu := url.URL{Scheme: "http", Host: clientAddr}
	pu := url.URL{Scheme: "http", Host: peerAddr}
	ec.ListenClientUrls, ec.AdvertiseClientUrls = []url.URL{cu}, []url.URL{cu}
	ec.ListenPeerUrls, ec.AdvertisePeerUrls = []url.URL{pu}, []url.URL{pu}
	ec.InitialCluster = ec.Name + "=" + pu.String()
	if cfg.InitialCluster != "" {
		ec.InitialCluster = cfg.InitialCluster
		ec.ClusterState = embed.ClusterStateFlagExisting
	}
	return cu, nil
}

// isAddrInUse: etcd could not listen because the address is taken.
func isAddrInUse(err error) bool {
	return errors.Is(err, syscall.EADDRINUSE)
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}
