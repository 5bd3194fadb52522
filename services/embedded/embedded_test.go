package embedded_test

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

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
