package embedded

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// NATSConfig configures an embedded NATS server with JetStream.
type NATSConfig struct {
	// StoreDir is the JetStream file store directory.
	StoreDir string
	// Port for clients on 127.0.0.1; -1 picks a free one.
	Port int
	// Host the client port listens on; "" is 127.0.0.1.
	Host string
	// Name is the server's name, unique in a NATS cluster (JetStream's
	// meta group knows its peers by it); "" is "cairn".
	Name string
	// Cluster, when its Name is set, makes the server one of a NATS
	// cluster with JetStream clustered (nats-server's cluster block).
	Cluster NATSCluster
}

// NATSCluster is the cluster block of a clustered server, as nats-server's
// clustering guide has it: a cluster name shared by every server, a route
// listener, and routes to (some of) the others; the servers gossip the rest.
type NATSCluster struct {
	// Name is the cluster's name; every server of one cluster has the same.
	Name string
	// Host and Port the route listener binds; Port -1 picks a free one.
	Host string
	Port int
	// Routes are nats-route://HOST:PORT URLs of other servers. A server
	// listed that is this one is ignored by nats-server. None (the first
	// server of a cluster) routes to itself: clustered JetStream needs a
	// route configured.
	Routes []string
	// Bootstrap makes a new cluster's first server serve JetStream alone
	// (see startMetaAlone); ignored once its store holds the meta group.
	Bootstrap bool
}

// MaxPayload is the largest message cairn publishes: an event carrying a
// 3 MiB object plus its envelope.
const MaxPayload = 8 << 20

// NATS is a running embedded NATS server.
type NATS struct {
	s *server.Server
	// sysUser and sysPass log an in-process connection into the system
	// account (clustered servers only), for the JetStream calls only it
	// may make (peer removal). The password is random, per process, and
	// never leaves it.
	sysUser, sysPass string
}

// sysAccount is nats-server's default system account name.
const sysAccount = "$SYS"

// StartNATS starts the server and waits until it accepts connections.
func StartNATS(cfg NATSConfig) (*NATS, error) {
	host := cfg.Host
	if host == "" {
		host = "127.0.0.1"
	}
	name := cfg.Name
	if name == "" {
		name = "cairn"
	}
	opts := &server.Options{
		ServerName: name,
		Host:       host,
		Port:       cfg.Port,
		JetStream:  true,
		StoreDir:   cfg.StoreDir,
		MaxPayload: MaxPayload,
		// Every kubelet reads its own pods through its own filtered
		// consumer: nats-server's default of 1,000 consumers per stream
		// would cap a cluster at 1,000 nodes.
		JetStreamLimits: server.JSLimitOpts{DefaultMaxConsumers: -1},
		// The binary owns signals.
		NoSigs: true,
		NoLog:  true,
	}
	n := &NATS{}
	alone := false
	if c := cfg.Cluster; c.Name != "" {
		if c.Bootstrap {
			fresh, err := bootstrapMeta(cfg.StoreDir, name)
			if err != nil {
				return nil, err
			}
			alone = fresh
		}
		if !alone {
			// A server whose meta group holds only itself (the others
			// were removed) restarts alone the same way: nothing routes
			// to it any more.
			peers, err := metaPeers(cfg.StoreDir)
			if err != nil {
				return nil, err
			}
			alone = len(peers) == 1 && peers[0] == nodeID(name)
		}
		// A user of the system account, for JSApiRemoveServer. With only
		// the global and the system account configured and no
		// authorization block, nats-server keeps clients without
		// credentials in the global account (its no-auth user), where the
		// streams have always been.
		pass, err := randomHex(16)
		if err != nil {
			return nil, err
		}
		sys := server.NewAccount(sysAccount)
		n.sysUser, n.sysPass = "cairn-system", pass
		opts.Accounts = []*server.Account{sys}
		opts.SystemAccount = sysAccount
		opts.Users = []*server.User{{Username: n.sysUser, Password: n.sysPass, Account: sys}}
		opts.Cluster = server.ClusterOpts{Name: c.Name, Host: c.Host, Port: c.Port}
		if opts.Cluster.Host == "" {
			opts.Cluster.Host = host
		}
		routes := c.Routes
		if len(routes) == 0 {
			// Clustered JetStream refuses to start without a route; the
			// first server of a cluster routes to itself (nats-server
			// ignores a route to its own listener), which needs its port
			// known before it listens.
			if opts.Cluster.Port <= 0 {
				p, err := freePort(opts.Cluster.Host)
				if err != nil {
					return nil, fmt.Errorf("embedded: nats cluster port: %w", err)
				}
				opts.Cluster.Port = p
			}
			routes = []string{"nats-route://" + net.JoinHostPort(opts.Cluster.Host, strconv.Itoa(opts.Cluster.Port))}
		}
		for _, r := range routes {
			u, err := url.Parse(r)
			if err != nil {
				return nil, fmt.Errorf("embedded: nats route %q: %w", r, err)
			}
			opts.Routes = append(opts.Routes, u)
		}
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("embedded: nats: %w", err)
	}
	go s.Start()
	if !s.ReadyForConnections(30 * time.Second) {
		s.Shutdown()
		return nil, errors.New("embedded: nats did not become ready in 30s")
	}
	n.s = s
	if alone {
		if err := startMetaAlone(n, opts.Cluster.Name, opts.Cluster.Host); err != nil {
			n.Close()
			return nil, err
		}
	}
	return n, nil
}

// ClusterURL is the route URL other servers of its cluster reach it on,
// nats-route://HOST:PORT; "" if the server is not clustered.
func (n *NATS) ClusterURL() string {
	addr := n.s.ClusterAddr()
	if addr == nil {
		return ""
	}
	return "nats-route://" + addr.String()
}

// Server is the running server, for its monitoring calls (Jsz, Routez).
func (n *NATS) Server() *server.Server { return n.s }

// URL is the client URL, e.g. nats://127.0.0.1:4222.
func (n *NATS) URL() string { return n.s.ClientURL() }

// Connect opens an in-process connection (no TCP) to the server.
func (n *NATS) Connect(opts ...nats.Option) (*nats.Conn, error) {
	opts = append([]nats.Option{nats.InProcessServer(n.s)}, opts...)
	nc, err := nats.Connect(n.s.ClientURL(), opts...)
	if err != nil {
		return nil, fmt.Errorf("embedded: nats connect: %w", err)
	}
	return nc, nil
}

// Close shuts the server down and waits for it.
func (n *NATS) Close() {
	n.s.Shutdown()
	n.s.WaitForShutdown()
}

func freePort(host string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func randomHex(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("embedded: nats system user: %w", err)
	}
	return hex.EncodeToString(b), nil
}
