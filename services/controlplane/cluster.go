package controlplane

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/services/embedded"
)

// Cluster makes the embedded etcd and NATS of a control plane one member
// of a cluster of servers, as k3s servers with embedded etcd are (cairn up
// --cluster-init, --join):
//
//   - etcd: the first server starts a cluster of one member; a server that
//     joins is added as a learner (etcd's member add, embedded.JoinEtcd)
//     through the members' client URLs, starts with the initial cluster
//     etcd returns, and is promoted once it has caught up. The apiserver
//     talks to its own member only, as k3s' does.
//   - NATS: every server is one of the NATS cluster ClusterName with
//     JetStream clustered, routed to the other servers recorded in etcd
//     (ServerRecord); nats-server gossips the rest.
//   - The log's streams and the KV buckets of the sharded consumers have
//     events.ReplicasFor(number of servers recorded) replicas: 1 below
//     three servers, 3 from three on. The server holding the log
//     publisher raises or lowers them (events.ScaleStream) within
//     ScaleInterval of a server being recorded or removed.
//
// A restart on the same data directory finds its etcd member there and
// the other servers' routes in etcd: it needs no token. Removal (DELETE
// ServersURL/NAME, cairn cluster remove) deletes the record, lowers the
// replicas, removes the NATS peer and the etcd member.
type Cluster struct {
	// Name is the server's name, unique in the cluster: its etcd
	// member's and its NATS server's.
	Name string
	// EtcdClientAddr and EtcdPeerAddr are host:port of its etcd member;
	// NATSAddr and NATSClusterAddr of its NATS server's client and route
	// listeners. The hosts are what the other servers reach.
	EtcdClientAddr, EtcdPeerAddr string
	NATSAddr, NATSClusterAddr    string
	// Join is set on a server joining a cluster; ignored once the etcd
	// data directory holds a member (a restart).
	Join *ClusterJoin
	// PKIDir holds what is handed to servers that join (ServerJoinURL):
	// the cluster CA and the service-account keys.
	PKIDir string
}

// ClusterJoin is what a joining server learned from the cluster
// (ServerJoin).
type ClusterJoin struct {
	Servers []ServerRecord
}

// ClusterName is the NATS cluster's name.
const ClusterName = "cairn"

// ScaleInterval is how often the replicas are checked against the
// cluster's size.
const ScaleInterval = 5 * time.Second

func (c *Cluster) etcdDir(dataDir string) string { return filepath.Join(dataDir, "etcd") }

// startClusterEtcd starts the server's etcd member: a new cluster, a
// learner added to the cluster joined, or the member its data directory
// holds. A learner is promoted before it returns.
func (cp *ControlPlane) startClusterEtcd(ctx context.Context, cfg Config) (*embedded.Etcd, error) {
	c := cfg.Cluster
	dir := c.etcdDir(cfg.DataDir)
	ec := embedded.EtcdConfig{Dir: dir, Name: c.Name, ClientAddr: c.EtcdClientAddr, PeerAddr: c.EtcdPeerAddr, NoFsync: cfg.NoFsync}
	_, statErr := os.Stat(filepath.Join(dir, "member"))
	if errors.Is(statErr, os.ErrNotExist) && c.Join != nil {
		var eps []string
		for _, s := range c.Join.Servers {
			if s.EtcdClient != "" {
				eps = append(eps, s.EtcdClient)
			}
		}
		jcli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			return nil, fmt.Errorf("controlplane: etcd of the cluster joined: %w", err)
		}
		defer jcli.Close()
		jctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		initial, _, err := embedded.JoinEtcd(jctx, jcli, c.Name, "http://"+c.EtcdPeerAddr)
		if err != nil {
			return nil, fmt.Errorf("controlplane: %w", err)
		}
		ec.InitialCluster = initial
		cfg.Log.Info("controlplane: joining etcd as a learner", "member", c.Name, "initialCluster", initial)
	}
	e, err := embedded.StartEtcd(ctx, ec)
	if err != nil {
		return nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := e.PromoteSelf(pctx); err != nil {
		e.Close()
		return nil, fmt.Errorf("controlplane: %w", err)
	}
	return e, nil
}

// clusterNATS is the embedded NATS configuration of a clustered server,
// routed to the other servers (from the join, or recorded in etcd).
func (cp *ControlPlane) clusterNATS(ctx context.Context, cfg Config, dir string) (embedded.NATSConfig, error) {
	c := cfg.Cluster
	host, port, err := splitPort(c.NATSAddr)
	if err != nil {
		return embedded.NATSConfig{}, fmt.Errorf("controlplane: nats address: %w", err)
	}
	chost, cport, err := splitPort(c.NATSClusterAddr)
	if err != nil {
		return embedded.NATSConfig{}, fmt.Errorf("controlplane: nats cluster address: %w", err)
	}
	var servers []ServerRecord
	if c.Join != nil {
		servers = c.Join.Servers
	}
	if recorded, err := ListServers(ctx, cp.Etcd); err == nil && len(recorded) > 0 {
		servers = recorded
	} else if err != nil {
		return embedded.NATSConfig{}, err
	}
	routes := routesOf(servers, c.Name)
	// The first server of a new cluster serves JetStream alone.
	first := c.Join == nil && len(routes) == 0
	return embedded.NATSConfig{StoreDir: dir, Host: host, Port: port, Name: c.Name,
		Cluster: embedded.NATSCluster{Name: ClusterName, Host: chost, Port: cport, Routes: routes, Bootstrap: first}}, nil
}

// awaitMeta waits until JetStream's meta group has a leader, so that the
// streams can be ensured.
func awaitMeta(ctx context.Context, n *embedded.NATS) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		if m, err := n.Meta(); err == nil && m.Leader != "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("controlplane: no JetStream meta leader: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// record records this server in etcd (ServerRecord).
func (cp *ControlPlane) record(ctx context.Context, cfg Config) error {
	c := cfg.Cluster
	return putServer(ctx, cp.Etcd, ServerRecord{Name: c.Name, APIServer: cp.Addr, EtcdClient: cp.embEtcd.Endpoint(),
		EtcdPeer: cp.embEtcd.PeerURL(), NATSClient: cp.embNATS.URL(), NATSRoute: cp.embNATS.ClusterURL()})
}

// scaleReplicas keeps the replicas of the streams and shard buckets at
// events.ReplicasFor(servers recorded), while this server holds the
// publisher; errors (a server not yet placed in the meta group) are
// retried at the next tick.
func (cp *ControlPlane) scaleReplicas(ctx context.Context, log *slog.Logger) error {
	t := time.NewTicker(ScaleInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if !cp.Publisher.IsLeader() {
			continue
		}
		servers, err := ListServers(ctx, cp.Etcd)
		if err != nil || len(servers) == 0 {
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		if err := ScaleLog(sctx, cp.JS, events.ReplicasFor(len(servers)), log); err != nil && ctx.Err() == nil {
			log.Warn("controlplane: stream replicas", "servers", len(servers), "err", err)
		}
		cancel()
	}
}

// shardStreamPrefix names the streams behind the shard buckets
// (KV_cairn_shards_<group>, package shard).
const shardStreamPrefix = "KV_cairn_shards_"

// ScaleLog sets the replicas of the log's two streams and of every shard
// bucket to replicas, each returning once its replicas are current
// (events.ScaleStream). Streams at that count are left alone.
func ScaleLog(ctx context.Context, js jetstream.JetStream, replicas int, log *slog.Logger) error {
	names := []string{events.Stream, events.LeaseStream}
	lister := js.StreamNames(ctx)
	for n := range lister.Name() {
		if strings.HasPrefix(n, shardStreamPrefix) {
			names = append(names, n)
		}
	}
	if err := lister.Err(); err != nil {
		return fmt.Errorf("controlplane: streams: %w", err)
	}
	for _, n := range names {
		s, err := js.Stream(ctx, n)
		if err != nil {
			return fmt.Errorf("controlplane: stream %s: %w", n, err)
		}
		if s.CachedInfo().Config.Replicas == replicas {
			continue
		}
		log.Info("controlplane: scaling stream", "stream", n, "from", s.CachedInfo().Config.Replicas, "to", replicas)
		if err := events.ScaleStream(ctx, js, n, replicas); err != nil {
			return err
		}
	}
	return nil
}
