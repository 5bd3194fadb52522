package embedded

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// NATSMeta is a clustered server's view of the JetStream meta group (the
// raft group that places streams), as nats-server's /jsz reports it.
type NATSMeta struct {
	Cluster string     `json:"cluster"`
	Leader  string     `json:"leader"`
	Peers   []NATSPeer `json:"peers"` // every peer known, the leader first
}

// NATSPeer is one server of the meta group.
type NATSPeer struct {
	Name    string `json:"name"`
	Leader  bool   `json:"leader,omitempty"`
	Current bool   `json:"current"`
	Offline bool   `json:"offline,omitempty"`
	Lag     uint64 `json:"lag,omitempty"`
}

// Meta returns the meta group as this server sees it. A server that is
// not clustered reports itself as the only peer.
func (n *NATS) Meta() (NATSMeta, error) {
	jsz, err := n.s.Jsz(&server.JSzOptions{})
	if err != nil {
		return NATSMeta{}, fmt.Errorf("embedded: nats jsz: %w", err)
	}
	m := jsz.Meta
	if m == nil {
		return NATSMeta{Leader: n.s.Name(), Peers: []NATSPeer{{Name: n.s.Name(), Leader: true, Current: true}}}, nil
	}
	out := NATSMeta{Cluster: m.Name, Leader: m.Leader}
	if m.Leader != "" {
		out.Peers = append(out.Peers, NATSPeer{Name: m.Leader, Leader: true, Current: true})
	}
	for _, p := range m.Replicas {
		if p.Name == m.Leader {
			continue
		}
		out.Peers = append(out.Peers, NATSPeer{Name: p.Name, Current: p.Current, Offline: p.Offline, Lag: p.Lag})
	}
	return out, nil
}

// ErrNotNATSPeer means the server named is not in the meta group.
var ErrNotNATSPeer = errors.New("embedded: not a JetStream peer")

// RemovePeer removes the server name from the JetStream meta group, as
// `nats server raft peer-remove` does (JSApiRemoveServer, which only the
// system account may call): its stream replicas are placed elsewhere and
// the group's quorum no longer counts it. Remove only a server that is
// stopped for good: a running one joins again. It returns ErrNotNATSPeer
// if name is not a peer.
func (n *NATS) RemovePeer(ctx context.Context, name string) error {
	if n.sysUser == "" {
		return errors.New("embedded: nats peer remove: the server is not clustered")
	}
	nc, err := n.Connect(nats.UserInfo(n.sysUser, n.sysPass), nats.Name("cairn-peer-remove"))
	if err != nil {
		return err
	}
	defer nc.Close()
	req, err := json.Marshal(map[string]string{"peer": name})
	if err != nil {
		return err
	}
	for {
		// Only the meta leader answers; during an election nobody does.
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		msg, err := nc.RequestWithContext(rctx, "$JS.API.SERVER.REMOVE", req)
		cancel()
		if err == nil {
			var resp struct {
				Success bool `json:"success"`
				Error   *struct {
					Code        int    `json:"err_code"`
					Description string `json:"description"`
				} `json:"error"`
			}
			if err := json.Unmarshal(msg.Data, &resp); err != nil {
				return fmt.Errorf("embedded: nats peer remove %s: %w", name, err)
			}
			switch {
			case resp.Error != nil && resp.Error.Code == 10044: // JSClusterServerNotMemberErr
				return fmt.Errorf("embedded: nats peer remove %s: %w", name, ErrNotNATSPeer)
			case resp.Error != nil && resp.Error.Code == 10202: // JSClusterServerMemberChangeInflightErr
				// The meta group is still applying another change (a
				// server that just joined): retried below.
			case resp.Error != nil:
				return fmt.Errorf("embedded: nats peer remove %s: %s", name, resp.Error.Description)
			case resp.Success:
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("embedded: nats peer remove %s: no meta leader answered: %w", name, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// A new cluster's first server serves JetStream alone, as etcd's first
// member does. nats-server does not do that by itself: it bootstraps a
// new meta group expecting at least two peers (raft.go's
// bootstrapRaftNode), and a raft group starts its run loop only once the
// server has a route, leaf or gateway connection (raft.go's run). So the
// first start of a cluster's first server (NATSCluster.Bootstrap, a store
// without a meta group) writes the meta group's peer state with itself as
// the only peer (cluster size 1), and routes a helper server (no
// JetStream, so never a peer) to it until the meta group has elected it;
// then the helper stops. Servers that join later are added to the group
// by its leader as to any other cluster. The peer state layout is
// nats-server v2.15's (peers.idx: cluster size, peer count, node ids,
// extension state); TestNATSBootstrapAlone covers it. A server restarted
// on a store whose meta group holds only itself (every other server was
// removed: nats-server rewrites the peer state on each removal) gets the
// same helper, kept until its streams have their leaders too (their raft
// groups wait for a route the same way); TestNATSRestartAlone.

func metaDir(storeDir string) string {
	return filepath.Join(storeDir, server.JetStreamStoreDir, sysAccount, "_js_", "_meta_")
}

func bootstrapMeta(storeDir, name string) (fresh bool, err error) {
	dir := metaDir(storeDir)
	if _, err := os.Stat(dir); err == nil {
		return false, nil
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return false, fmt.Errorf("embedded: nats meta group: %w", err)
	}
	buf := make([]byte, 4+4+nodeIDLen+2)
	binary.LittleEndian.PutUint32(buf[0:], 1)
	binary.LittleEndian.PutUint32(buf[4:], 1)
	copy(buf[8:], nodeID(name))
	if err := os.WriteFile(filepath.Join(dir, "peers.idx"), buf, 0o640); err != nil {
		return false, fmt.Errorf("embedded: nats meta group: %w", err)
	}
	return true, nil
}

// metaPeers returns the node ids of the meta group's peers as the store
// holds them (peers.idx), nil if it holds no meta group.
func metaPeers(storeDir string) ([]string, error) {
	buf, err := os.ReadFile(filepath.Join(metaDir(storeDir), "peers.idx"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("embedded: nats meta group: %w", err)
	}
	if len(buf) < 8 {
		return nil, fmt.Errorf("embedded: nats meta group: peers.idx of %d bytes", len(buf))
	}
	n := int(binary.LittleEndian.Uint32(buf[4:]))
	if len(buf) < 8+n*nodeIDLen {
		return nil, fmt.Errorf("embedded: nats meta group: peers.idx of %d bytes for %d peers", len(buf), n)
	}
	peers := make([]string, n)
	for i := range peers {
		peers[i] = string(buf[8+i*nodeIDLen : 8+(i+1)*nodeIDLen])
	}
	return peers, nil
}

// startMetaAlone routes a helper server to n until n's meta group has a
// leader (itself) and every stream it holds has one, then stops the
// helper.
func startMetaAlone(n *NATS, clusterName, host string) error {
	route, err := url.Parse(n.ClusterURL())
	if err != nil {
		return fmt.Errorf("embedded: nats bootstrap: %w", err)
	}
	h, err := server.NewServer(&server.Options{ServerName: n.s.Name() + "-bootstrap", Host: "127.0.0.1", Port: -1, NoSigs: true, NoLog: true,
		Cluster: server.ClusterOpts{Name: clusterName, Host: host, Port: -1}, Routes: []*url.URL{route}})
	if err != nil {
		return fmt.Errorf("embedded: nats bootstrap helper: %w", err)
	}
	go h.Start()
	defer func() { h.Shutdown(); h.WaitForShutdown() }()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if m, err := n.Meta(); err == nil && m.Leader != "" && n.streamsLed() {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return errors.New("embedded: nats bootstrap: no JetStream meta leader, or a stream without a leader, in 60s")
}

// streamsLed reports whether every clustered stream the server holds has a
// leader.
func (n *NATS) streamsLed() bool {
	jsz, err := n.s.Jsz(&server.JSzOptions{Accounts: true, Streams: true})
	if err != nil {
		return false
	}
	for _, a := range jsz.AccountDetails {
		for _, st := range a.Streams {
			if st.Cluster != nil && st.Cluster.Leader == "" {
				return false
			}
		}
	}
	return true
}

const nodeIDLen = 8

// nodeID is nats-server's raft node id of the server name (getHash).
func nodeID(name string) string {
	const digits = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	b := sha256.Sum256([]byte(name))
	out := make([]byte, nodeIDLen)
	for i := range out {
		out[i] = digits[int(b[i]%62)]
	}
	return string(out)
}
