package publish_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/oklog/ulid/v2"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/events/publish"
	"github.com/cairn-dev/cairn/services/embedded/embeddedtest"
)

// env is a pair of real servers with the streams created.
type env struct {
	etcd *embeddedtest.Etcd
	nats *embeddedtest.NATS
	cli  *clientv3.Client
	js   jetstream.JetStream
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := embeddedtest.StartEtcd(t)
	n := embeddedtest.StartNATS(t)
	js, err := jetstream.New(n.Conn)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := events.EnsureStreams(ctx, js, events.StreamConfig{}); err != nil {
		t.Fatal(err)
	}
	return &env{etcd: e, nats: n, cli: e.Client, js: js}
}

func testLogger(t *testing.T) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("test", t.Name())
	}
	return slog.New(slog.DiscardHandler)
}

// running is a publisher running in a goroutine of the test.
type running struct {
	p    *publish.Publisher
	stop context.CancelFunc
	done chan struct{}
}

func (e *env) startPublisher(t *testing.T, cfg publish.PublisherConfig) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{p: publish.NewPublisher(e.cli, e.js, cfg, testLogger(t)), stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		if err := r.p.Run(ctx); err != nil {
			t.Errorf("publisher Run: %v", err)
		}
	}()
	t.Cleanup(r.halt)
	return r
}

// halt stops the publisher and waits for it.
func (r *running) halt() {
	r.stop()
	<-r.done
}

// waitPublished waits until the log holds revision rev.
func (e *env) waitPublished(t *testing.T, rev int64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		last, err := events.LastPublishedRevision(context.Background(), e.js)
		if err != nil {
			t.Fatal(err)
		}
		if last >= events.Revision(rev) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("log stuck at revision %d, want %d", last, rev)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func object(apiVersion, kind, namespace, name string, extra map[string]any) string {
	md := map[string]any{"name": name, "uid": "uid-" + namespace + "-" + name}
	if namespace != "" {
		md["namespace"] = namespace
	}
	o := map[string]any{"apiVersion": apiVersion, "kind": kind, "metadata": md}
	for k, v := range extra {
		o[k] = v
	}
	b, _ := json.Marshal(o)
	return string(b)
}

func pod(namespace, name, node string, gen int) string {
	return object("v1", "Pod", namespace, name, map[string]any{
		"spec":   map[string]any{"nodeName": node, "containers": []any{map[string]any{"name": "c", "image": "busybox"}}},
		"status": map[string]any{"gen": gen},
	})
}

func lease(namespace, name string, renew int) string {
	return object("coordination.k8s.io/v1", "Lease", namespace, name, map[string]any{
		"spec": map[string]any{"holderIdentity": name, "renewTime": renew},
	})
}

// meta is the WriteMeta of an apiserver write by user.
func meta(key, verb, user string) events.WriteMeta {
	return events.WriteMeta{ID: ulid.Make().String(), Verb: verb, Key: key, Actor: events.Actor{User: user, Groups: []string{"system:authenticated"}}, Time: time.Now().UTC()}
}

// write commits a write the way the apiserver does: one txn with the object
// (or its deletion) and the WriteMeta. obj == "" deletes. It returns the
// revision.
func write(ctx context.Context, cli *clientv3.Client, key, obj string, m events.WriteMeta) (int64, error) {
	mb, err := json.Marshal(m)
	if err != nil {
		return 0, err
	}
	var txn clientv3.Txn
	switch {
	case obj == "":
		txn = cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), ">", 0)).
			Then(clientv3.OpDelete(key), clientv3.OpPut(events.MetaKey, string(mb)))
	case m.Verb == "create":
		txn = cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
			Then(clientv3.OpPut(key, obj), clientv3.OpPut(events.MetaKey, string(mb)))
	default:
		txn = cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), ">", 0)).
			Then(clientv3.OpPut(key, obj), clientv3.OpPut(events.MetaKey, string(mb)))
	}
	resp, err := txn.Commit()
	if err != nil {
		return 0, err
	}
	if !resp.Succeeded {
		return 0, fmt.Errorf("txn on %s did not apply", key)
	}
	return resp.Header.Revision, nil
}

func mustWrite(t *testing.T, cli *clientv3.Client, key, obj string, m events.WriteMeta) int64 {
	t.Helper()
	rev, err := write(context.Background(), cli, key, obj, m)
	if err != nil {
		t.Fatalf("write %s: %v", key, err)
	}
	return rev
}

// tailAll returns every stored event matching opts.
func tailAll(t *testing.T, js jetstream.JetStream, opts events.TailOptions) []*events.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []*events.Event
	if err := events.Tail(ctx, js, opts, func(e *events.Event) error {
		out = append(out, e)
		return nil
	}); err != nil {
		t.Fatalf("tail: %v", err)
	}
	return out
}

func verifyOK(t *testing.T, e *env) *publish.Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rep, err := publish.Verify(ctx, e.cli, e.js)
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	if !rep.OK() {
		w := &testWriter{t: t}
		_ = rep.Write(w)
		for _, ev := range tailAll(t, e.js, events.TailOptions{Group: "coordination.k8s.io", Resource: "leases"}) {
			t.Logf("lease stream: %s", events.FormatLine(ev))
		}
		t.Fatalf("verify found problems")
	}
	return rep
}

type testWriter struct{ t *testing.T }

func (w *testWriter) Write(b []byte) (int, error) {
	w.t.Log(string(b))
	return len(b), nil
}
