package controlplane

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Servers that join into one cluster (cairn up --cluster-init / --join)
// each carry a member of the embedded etcd cluster and a server of the
// NATS cluster. Each records itself in etcd under ServersPrefix, so that
// a server that joins or restarts finds the others' NATS routes, the
// streams' replicas follow the number of servers (Cluster), and `cairn
// cluster remove` finds what to remove.

// ServersPrefix is the etcd prefix of the server records.
const ServersPrefix = "/cairn/servers/"

// ServerRecord is one server of a cluster, as it records itself.
type ServerRecord struct {
	// Name is the server's name: its etcd member's and its NATS
	// server's.
	Name string `json:"name"`
	// APIServer is its apiserver's host:port.
	APIServer string `json:"apiserver"`
	// EtcdClient and EtcdPeer are its etcd member's URLs.
	EtcdClient string `json:"etcdClient"`
	EtcdPeer   string `json:"etcdPeer"`
	// NATSClient and NATSRoute are its NATS server's client URL
	// (nats://) and route URL (nats-route://).
	NATSClient string `json:"natsClient"`
	NATSRoute  string `json:"natsRoute"`
}

// ListServers reads every server record.
func ListServers(ctx context.Context, cli *clientv3.Client) ([]ServerRecord, error) {
	resp, err := cli.Get(ctx, ServersPrefix, clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("controlplane: servers: %w", err)
	}
	out := make([]ServerRecord, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		var r ServerRecord
		if err := json.Unmarshal(kv.Value, &r); err != nil {
			return nil, fmt.Errorf("controlplane: server record %s: %w", kv.Key, err)
		}
		out = append(out, r)
	}
	return out, nil
}

func putServer(ctx context.Context, cli *clientv3.Client, r ServerRecord) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if _, err := cli.Put(ctx, ServersPrefix+r.Name, string(b)); err != nil {
		return fmt.Errorf("controlplane: record server %s: %w", r.Name, err)
	}
	return nil
}

// ErrNoServer means no server of that name is recorded.
var ErrNoServer = errors.New("controlplane: no such server")

func deleteServer(ctx context.Context, cli *clientv3.Client, name string) error {
	if name == "" || strings.Contains(name, "/") {
		return fmt.Errorf("controlplane: server %q: %w", name, ErrNoServer)
	}
	resp, err := cli.Delete(ctx, ServersPrefix+name)
	if err != nil {
		return fmt.Errorf("controlplane: delete server %s: %w", name, err)
	}
	if resp.Deleted == 0 {
		return fmt.Errorf("controlplane: server %q: %w", name, ErrNoServer)
	}
	return nil
}

// routesOf are the NATS route URLs of the servers other than self.
func routesOf(servers []ServerRecord, self string) []string {
	var out []string
	for _, s := range servers {
		if s.Name != self && s.NATSRoute != "" {
			out = append(out, s.NATSRoute)
		}
	}
	return out
}
