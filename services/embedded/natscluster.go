package embedded

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
