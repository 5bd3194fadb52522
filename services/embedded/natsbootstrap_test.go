package embedded_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

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
	waitMeta(t, first, func(m embedded.NATSMeta) bool { return len(m.Peers) == 2 })
}

// TestNATSRestartAlone: the last server of a cluster whose other server
// was removed restarts alone on its store, with its meta leader (itself)
// and its stream's leader, and serves the stream's messages.
func TestNATSRestartAlone(t *testing.T) {
	dir := t.TempDir()
	cluster := embedded.NATSCluster{Name: "c", Port: -1, Bootstrap: true}
	first, err := embedded.StartNATS(embedded.NATSConfig{StoreDir: dir, Port: -1, Name: "a", Cluster: cluster})
	if err != nil {
		t.Fatal(err)
	}
	// The stream (one replica) is created while a is alone, so that it is
	// a's: created with b there, the meta leader could place it on b, and
	// removing b would move it to a empty.
	js := jetStream(t, first)
	if _, err := js.AddStream(&nats.StreamConfig{Name: "S", Subjects: []string{"s.>"}, Storage: nats.FileStorage}); err != nil {
		first.Close()
		t.Fatal(err)
	}
	if _, err := js.Publish("s.1", []byte("kept")); err != nil {
		first.Close()
		t.Fatal(err)
	}
	second, err := embedded.StartNATS(embedded.NATSConfig{StoreDir: t.TempDir(), Port: -1, Name: "b",
		Cluster: embedded.NATSCluster{Name: "c", Port: -1, Routes: []string{first.ClusterURL()}}})
	if err != nil {
		first.Close()
		t.Fatal(err)
	}
	// b's addition committed (both peers current) before b stops: a
	// group of two with b gone has no quorum to finish a change in flight,
	// and the removal would wait on it ("cluster member change is in
	// progress").
	waitMeta(t, first, func(m embedded.NATSMeta) bool {
		return len(m.Peers) == 2 && m.Peers[0].Current && m.Peers[1].Current
	})
	second.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := first.RemovePeer(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	waitMeta(t, first, func(m embedded.NATSMeta) bool { return len(m.Peers) == 1 })
	first.Close()

	again, err := embedded.StartNATS(embedded.NATSConfig{StoreDir: dir, Port: -1, Name: "a", Cluster: cluster})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if m, err := again.Meta(); err != nil || m.Leader != "a" {
		t.Fatalf("after the restart meta = %+v, %v; want leader a", m, err)
	}
	js = jetStream(t, again)
	msg, err := js.GetMsg("S", 1)
	if err != nil || string(msg.Data) != "kept" {
		t.Fatalf("message 1 of S after the restart: %v, %v", msg, err)
	}
	if _, err := js.Publish("s.2", []byte("new")); err != nil {
		t.Fatalf("publish after the restart: %v", err)
	}
}

// waitMeta waits up to a minute until n's meta group is ok.
func waitMeta(t *testing.T, n *embedded.NATS, ok func(embedded.NATSMeta) bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		m, err := n.Meta()
		if err == nil && ok(m) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("meta = %+v, %v", m, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func jetStream(t *testing.T, n *embedded.NATS) nats.JetStreamContext {
	t.Helper()
	nc, err := n.Connect()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := nc.JetStream()
	if err != nil {
		t.Fatal(err)
	}
	return js
}
