package replay

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cairn-dev/cairn/services/embedded"
)

// member is the destination etcd: a member with no listeners at all, written
// through an in-process client that calls the server's KV API directly,
// without gRPC or a socket. `cairn up` later serves the same directory with
// its own listeners; both are embedded.StartEtcd, so the directory the
// replay leaves behind is one `cairn up` accepts.
type member struct {
	e   *embedded.Etcd
	cli *clientv3.Client
}

// startMember starts the member in dir and waits until it serves.
func startMember(ctx context.Context, dir string, fsync bool) (*member, error) {
	e, err := embedded.StartEtcd(ctx, embedded.EtcdConfig{Dir: dir, NoListen: true, NoFsync: !fsync})
	if err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	return &member{e: e, cli: e.InProcessClient()}, nil
}

func (m *member) close() {
	m.cli.Close()
	m.e.Close()
}
