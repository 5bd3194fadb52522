package embeddedtest

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/logger"
	"github.com/nats-io/nats.go"

	"github.com/cairn-dev/cairn/services/embedded"
)

// NATSCluster is a test NATS cluster with JetStream clustered, on loopback.
type NATSCluster struct {
	Servers []*embedded.NATS
	// Conn is connected to all servers' client URLs.
	Conn *nats.Conn
}

// StartNATSCluster starts n clustered NATS servers with JetStream (names
// n1..nN, cluster "cairn-test"), each in its own t.TempDir(), the others
// routed to the first, and waits until JetStream has a meta leader with
// all n peers. It stops them with t.Cleanup. With CAIRN_TEST_NATS_LOG set
// the servers log to stderr.
func StartNATSCluster(t testing.TB, n int) *NATSCluster {
	t.Helper()
	c := &NATSCluster{}
	var routes []string
	for i := range n {
		s, err := embedded.StartNATS(embedded.NATSConfig{StoreDir: t.TempDir(), Port: -1, Name: fmt.Sprintf("n%d", i+1),
			Cluster: embedded.NATSCluster{Name: "cairn-test", Port: -1, Routes: routes}})
		if err != nil {
			t.Fatalf("start nats %d: %v", i+1, err)
		}
		t.Cleanup(s.Close)
		if os.Getenv("CAIRN_TEST_NATS_LOG") != "" {
			// nats-server's own log, prefixed with the server's name: what a
			// stream's replicas did (catchups, apply errors, elections).
			s.Server().SetLogger(logger.NewTestLogger(fmt.Sprintf("[n%d] ", i+1), true), false, false)
		}
		if i == 0 {
			routes = []string{s.ClusterURL()}
		}
		c.Servers = append(c.Servers, s)
	}
	deadline := time.Now().Add(60 * time.Second)
	for !c.metaReady(n) {
		if time.Now().After(deadline) {
			t.Fatalf("nats cluster: no JetStream meta leader with %d peers in 60s", n)
		}
		time.Sleep(100 * time.Millisecond)
	}
	urls := ""
	for i, s := range c.Servers {
		if i > 0 {
			urls += ","
		}
		urls += s.URL()
	}
	nc, err := nats.Connect(urls, nats.MaxReconnects(-1))
	if err != nil {
		t.Fatalf("nats connect: %v", err)
	}
	t.Cleanup(nc.Close)
	c.Conn = nc
	return c
}

func (c *NATSCluster) metaReady(n int) bool {
	for _, s := range c.Servers {
		jsz, err := s.Server().Jsz(nil)
		if err != nil || jsz.Meta == nil || jsz.Meta.Leader == "" || jsz.Meta.Size < n {
			return false
		}
	}
	return true
}
