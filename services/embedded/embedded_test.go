package embedded_test

import (
	"context"
	"errors"
	"net"
	"syscall"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/services/embedded"
	"github.com/cairn-dev/cairn/services/embedded/embeddedtest"
)

func TestServersServe(t *testing.T) {
	ctx := context.Background()
	e := embeddedtest.StartEtcd(t)
	if _, err := e.Client.Put(ctx, "/k", "v"); err != nil {
		t.Fatalf("etcd put: %v", err)
	}
	n := embeddedtest.StartNATS(t)
	js, err := jetstream.New(n.Conn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "T", Subjects: []string{"t.>"}}); err != nil {
		t.Fatalf("create stream: %v", err)
	}
	if _, err := js.Publish(ctx, "t.x", []byte("hi")); err != nil {
		t.Fatalf("publish: %v", err)
	}
}

// TestEtcdAddrInUse: a client address another listener holds makes
// StartEtcd fail with EADDRINUSE in its chain: the retry on a picked port
// that was taken in the meantime relies on recognising it.
func TestEtcdAddrInUse(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, err = embedded.StartEtcd(context.Background(), embedded.EtcdConfig{Dir: t.TempDir(), ClientAddr: l.Addr().String(), NoFsync: true})
	if !errors.Is(err, syscall.EADDRINUSE) {
		t.Fatalf("StartEtcd on a taken address: %v, want EADDRINUSE", err)
	}
}
