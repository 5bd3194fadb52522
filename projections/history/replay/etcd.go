package replay

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3client"
	"go.uber.org/zap"

	"github.com/cairn-dev/cairn/services/embedded"
)

// member is the destination etcd: a member with no listeners at all, written
// through an in-process client (v3client) that calls the server's KV API
// directly, without gRPC or a socket. `cairn up` later serves the same
// directory with its own listeners (embedded.StartEtcd).
type member struct {
	e   *embed.Etcd
	cli *clientv3.Client
}

// startMember starts the member in dir and waits until it serves. Its
// limits are those of embedded.StartEtcd, so that the directory it leaves
// behind is one `cairn up` accepts.
func startMember(ctx context.Context, dir string, fsync bool) (*member, error) {
	ec := embed.NewConfig()
	// The name and the single-member cluster are what embedded.StartEtcd
	// bootstraps; the peer URL is recorded, never listened on.
	ec.Name = "cairn"
	ec.Dir = filepath.Clean(dir)
	peer := url.URL{Scheme: "http", Host: "127.0.0.1:2380"}
	ec.ListenClientUrls, ec.AdvertiseClientUrls, ec.ListenPeerUrls = nil, nil, nil
	ec.AdvertisePeerUrls = []url.URL{peer}
	ec.InitialCluster = ec.Name + "=" + peer.String()
	ec.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	ec.LogLevel = "error"
	ec.AutoCompactionRetention = "0"
	ec.MaxRequestBytes = embedded.MaxRequestBytes
	ec.QuotaBackendBytes = 8 << 30
	ec.UnsafeNoFsync = !fsync
	e, err := embed.StartEtcd(ec)
	if err != nil {
		return nil, fmt.Errorf("replay: etcd: %w", err)
	}
	select {
	case <-e.Server.ReadyNotify():
		return &member{e: e, cli: v3client.New(e.Server)}, nil
	case err = <-e.Err():
	case <-ctx.Done():
		err = ctx.Err()
	case <-time.After(time.Minute):
		err = errors.New("not ready after a minute")
	}
	e.Close()
	return nil, fmt.Errorf("replay: etcd: %w", err)
}

func (m *member) close() {
	m.cli.Close()
	m.e.Close()
}
