package events_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/services/embedded"
)

// Example reads the log with a Reader: one pod's events, filtered on the
// server. The message is published by hand here, with the subject and
// headers the publisher (events/publish) gives every change.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "cairn-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ns, err := embedded.StartNATS(embedded.NATSConfig{StoreDir: dir, Port: -1})
	if err != nil {
		log.Fatal(err)
	}
	defer ns.Close()
	nc, err := ns.Connect()
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		log.Fatal(err)
	}
	if err := events.EnsureStreams(ctx, js, events.StreamConfig{Replicas: 1}); err != nil {
		log.Fatal(err)
	}

	for i, name := range []string{"web-0", "web-1"} {
		ev := events.Event{Revision: events.Revision(7 + i), Type: events.Added, Version: "v1", Resource: "pods",
			Kind: "Pod", Namespace: "default", Name: name, Actor: events.Actor{User: "alice"}}
		m := nats.NewMsg(ev.Subject())
		m.Header.Set(jetstream.MsgIDHeader, ev.Revision.String())
		m.Header.Set(events.MsgHeaderRevision, ev.Revision.String())
		m.Header.Set(events.MsgHeaderType, string(ev.Type))
		m.Data = []byte(fmt.Sprintf(`{"revision":%d,"type":"ADDED","resource":"pods","kind":"Pod","namespace":"default","name":%q,"actor":{"user":"alice"}}`, ev.Revision, name))
		if _, err := js.PublishMsg(ctx, m); err != nil {
			log.Fatal(err)
		}
	}

	opts := events.ReadOptions{Stream: events.Stream, Filters: []string{events.Filter("", "pods", "", "default", "web-1")}}
	err = events.Read(ctx, js, opts, func(m *events.Msg) error {
		e, err := m.Event()
		if err != nil {
			return err
		}
		fmt.Println(m.Seq, e.Revision, e.Type, e.Kind, e.Namespace+"/"+e.Name, e.Actor.User)
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output:
	// 2 8 ADDED Pod default/web-1 alice
}
