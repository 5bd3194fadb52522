package embedded

import (
	"errors"
	"fmt"
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
}

// MaxPayload is the largest message cairn publishes: an event carrying a
// 3 MiB object plus its envelope.
const MaxPayload = 8 << 20

// NATS is a running embedded NATS server.
type NATS struct {
	s *server.Server
}

// StartNATS starts the server and waits until it accepts connections.
func StartNATS(cfg NATSConfig) (*NATS, error) {
	opts := &server.Options{
		ServerName: "cairn",
		Host:       "127.0.0.1",
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
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("embedded: nats: %w", err)
	}
	go s.Start()
	if !s.ReadyForConnections(30 * time.Second) {
		s.Shutdown()
		return nil, errors.New("embedded: nats did not become ready in 30s")
	}
	return &NATS{s: s}, nil
}

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
