package publish_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/events/publish"
	"github.com/cairn-dev/cairn/services/embedded"
)

// Example runs the publisher on embedded etcd and NATS, commits one object
// the way the apiserver does, and reads the event back from the log.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "cairn-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	etcd, err := embedded.StartEtcd(ctx, embedded.EtcdConfig{Dir: filepath.Join(dir, "etcd"), NoFsync: true})
	if err != nil {
		log.Fatal(err)
	}
	defer etcd.Close()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{etcd.Endpoint()}, Logger: zap.NewNop()})
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close()
	ns, err := embedded.StartNATS(embedded.NATSConfig{StoreDir: filepath.Join(dir, "nats"), Port: -1})
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

	// Streams first, then the publisher (one per apiserver; they elect a
	// leader).
	if err := events.EnsureStreams(ctx, js, events.StreamConfig{Replicas: 1}); err != nil {
		log.Fatal(err)
	}
	pub := publish.NewPublisher(cli, js, publish.PublisherConfig{}, nil)
	pctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- pub.Run(pctx) }()

	// The apiserver's write: the object and its WriteMeta in one txn.
	key := events.RegistryKey("", "configmaps", "default", "settings")
	obj := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"settings","namespace":"default","uid":"u-1"},"data":{"a":"1"}}`
	meta, _ := json.Marshal(events.WriteMeta{
		ID: "01J00000000000000000000000", Verb: "create", Key: key,
		Actor: events.Actor{User: "alice"}, Time: time.Now(),
	})
	resp, err := cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, obj), clientv3.OpPut(events.MetaKey, string(meta))).
		Commit()
	if err != nil || !resp.Succeeded {
		log.Fatal("create failed: ", err)
	}
	for pub.LastPublished() < events.Revision(resp.Header.Revision) {
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	<-done

	err = events.Tail(ctx, js, events.TailOptions{Resource: "configmaps", Namespace: "default"}, func(e *events.Event) error {
		fmt.Println(e.Type, e.Kind, e.Namespace+"/"+e.Name, e.Actor.User, e.ID, e.Revision == events.Revision(resp.Header.Revision))
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output:
	// ADDED ConfigMap default/settings alice 01J00000000000000000000000 true
}
