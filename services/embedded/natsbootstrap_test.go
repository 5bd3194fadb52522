package embedded_test

import (
	"testing"
	"time"

	"github.com/cairn-dev/cairn/services/embedded"
)

// TestNATSBootstrapAlone: a new cluster's first server has a JetStream
// meta leader (itself) alone, and a second server routed to it joins its
// meta group.
func TestNATSBootstrapAlone(t *testing.T) {
	first, err := embedded.StartNATS(embedded.NATSConfig{StoreDir: t.TempDir(), Port: -1, Name: "a",
		Cluster: embedded.NATSCluster{Name: "c", Port: -1, Bootstrap: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	if m, err := first.Meta(); err != nil || m.Leader != "a" {
		t.Fatalf("meta = %+v, %v; want leader a", m, err)
	}
	second, err := embedded.StartNATS(embedded.NATSConfig{StoreDir: t.TempDir(), Port: -1, Name: "b",
		Cluster: embedded.NATSCluster{Name: "c", Port: -1, Routes: []string{first.ClusterURL()}}})
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	deadline := time.Now().Add(60 * time.Second)
	for {
		m, err := first.Meta()
		if err == nil && len(m.Peers) == 2 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("meta = %+v, %v; want peers a and b", m, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
