package main

import (
	"context"
	"errors"
	"flag"

	"github.com/cairn-dev/cairn/services/cairn/up"
)

// upJoinFlags are cairn up's flags for servers that join into one
// cluster (up/cluster.go).
type upJoinFlags struct {
	url, token string
}

func (f *upJoinFlags) register(fs *flag.FlagSet, cfg *up.Config) {
	d := up.DefaultClusterPorts
	fs.BoolVar(&cfg.ClusterInit, "cluster-init", false, "start the first server of a cluster others join (cairn up --join); writes <data-dir>/join-token")
	fs.StringVar(&f.url, "join", "", "join the cluster of the server at https://ADDR:PORT (with --join-token); ignored once the data directory is a member")
	fs.StringVar(&f.token, "join-token", "", "the cluster's server token (the first server's <data-dir>/join-token)")
	fs.IntVar(&cfg.ClusterPorts.EtcdClient, "etcd-client-port", d.EtcdClient, "with --cluster-init or --join: etcd's client port on the host of --listen")
	fs.IntVar(&cfg.ClusterPorts.EtcdPeer, "etcd-peer-port", d.EtcdPeer, "with --cluster-init or --join: etcd's peer port on the host of --listen")
	fs.IntVar(&cfg.ClusterPorts.NATS, "nats-port", d.NATS, "with --cluster-init or --join: NATS' client port on the host of --listen")
	fs.IntVar(&cfg.ClusterPorts.NATSCluster, "nats-cluster-port", d.NATSCluster, "with --cluster-init or --join: NATS' route port on the host of --listen")
}

// fetch checks the flags and, for a server joining anew, reads the
// cluster's hand-over (up.FetchJoin) before anything is written.
func (f *upJoinFlags) fetch(ctx context.Context, cfg *up.Config) error {
	switch {
	case cfg.ClusterInit && (len(cfg.EtcdEndpoints) > 0 || cfg.NATSURL != ""):
		return errors.New("--cluster-init runs an embedded etcd and NATS: it excludes --etcd-endpoints and --nats-url")
	case f.url == "" && f.token != "":
		return errors.New("--join-token needs --join")
	case f.url == "":
		return nil
	case cfg.ClusterInit:
		return errors.New("--cluster-init and --join exclude each other")
	case f.token == "":
		return errors.New("--join needs --join-token")
	case len(cfg.EtcdEndpoints) > 0 || cfg.NATSURL != "":
		return errors.New("--join runs an embedded etcd and NATS: it excludes --etcd-endpoints and --nats-url")
	}
	if up.Clustered(cfg.DataDir) {
		return nil // a member already: a restart needs no token
	}
	j, err := up.FetchJoin(ctx, f.url, f.token)
	if err != nil {
		return err
	}
	cfg.Join = j
	return nil
}
