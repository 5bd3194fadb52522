package publish_test

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/events/publish"
	"github.com/cairn-dev/cairn/services/embedded"
	"github.com/cairn-dev/cairn/services/embedded/embeddedtest"
)

// TestPublishWhileStreamsScale publishes a steady stream of writes to a
// three-server NATS cluster while the streams go from 1 to 3 replicas and
// their leaders step down: publishes then go unanswered ("no response from
// stream") or fail their fences, and the publisher must publish them again
// with the same ids until they are acknowledged. Afterwards the log must be
// exactly etcd's history (Verify), on every server.
//
// It also keeps the publisher from sending Nats-Expected-Last-Msg-Id: the
// two new replicas catch up from the leader without learning the last
// message id, fail that check on the next publish and stop, and the stream
// stays without quorum (nats-server logs "last msgid mismatch" and
// "critical write error"; CAIRN_TEST_NATS_LOG=1 shows them).
func TestPublishWhileStreamsScale(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a three-server NATS cluster under writes")
	}
	etcd := embeddedtest.StartEtcd(t)
	nc := embeddedtest.StartNATSCluster(t, 3)
	js, err := jetstream.New(nc.Conn)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := events.EnsureStreams(ctx, js, events.StreamConfig{Replicas: 1}); err != nil {
		t.Fatal(err)
	}
	e := &env{etcd: etcd, cli: etcd.Client, js: js}
	reg := prometheus.NewRegistry()
	e.startPublisher(t, publish.PublisherConfig{AckTimeout: 2 * time.Second, SessionTTL: 2 * time.Second, Registerer: reg})

	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		lastRev int64
		stop    = make(chan struct{})
	)
	for w := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				name := fmt.Sprintf("w%d-%d", w, i%50)
				key := "/registry/pods/default/" + name
				verb := "create"
				if i >= 50 {
					verb = "update"
				}
				obj, k := pod("default", name, "n1", i), key
				if w == 3 {
					// One writer renews leases: the other stream.
					k = "/registry/leases/kube-node-lease/" + name
					obj = lease("kube-node-lease", name, i)
				}
				rev, err := write(ctx, e.cli, k, obj, meta(k, verb, "writer"))
				if err != nil {
					t.Errorf("write %s: %v", k, err)
					return
				}
				mu.Lock()
				lastRev = max(lastRev, rev)
				mu.Unlock()
				time.Sleep(2 * time.Millisecond)
			}
		})
	}

	time.Sleep(time.Second)
	if err := events.ScaleStreams(ctx, js, events.StreamConfig{Replicas: events.ReplicasFor(len(nc.Servers))}); err != nil {
		t.Fatalf("scale the streams to 3 replicas: %v", err)
	}
	for i := range 3 {
		time.Sleep(time.Second)
		for _, name := range []string{events.Stream, events.LeaseStream} {
			if _, err := nc.Conn.RequestWithContext(ctx, "$JS.API.STREAM.LEADER.STEPDOWN."+name, nil); err != nil {
				t.Logf("step down %s (%d): %v", name, i, err)
			}
		}
	}
	time.Sleep(time.Second)
	close(stop)
	wg.Wait()
	e.waitPublished(t, lastRev)
	for i, s := range nc.Servers {
		// Verify reads through each server in turn.
		sc, err := s.Connect()
		if err != nil {
			t.Fatal(err)
		}
		sjs, err := jetstream.New(sc)
		if err != nil {
			t.Fatal(err)
		}
		rep := verifyOK(t, &env{cli: e.cli, js: sjs})
		t.Logf("server %d: verify ok, %d events", i+1, rep.Events)
		sc.Close()
	}
	t.Logf("publishes retried: %v", counter(t, reg, "cairn_log_publish_retries_total"))
}

func counter(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}

// TestPublishAcrossNATSRestart restarts the (single, R1) NATS server on
// its store while writes go on: the publishes in flight lose their
// answers, and an R1 stream checks the fences before duplicates, so a
// message stored by a lost attempt comes back as "wrong last sequence" on
// its retry. The publisher must tell that from a hole, and the log must
// match etcd afterwards.
func TestPublishAcrossNATSRestart(t *testing.T) {
	etcd := embeddedtest.StartEtcd(t)
	dir := t.TempDir()
	port := freePort(t)
	start := func() *embedded.NATS {
		n, err := embedded.StartNATS(embedded.NATSConfig{StoreDir: dir, Port: port})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	n := start()
	nc, err := nats.Connect(n.URL(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := events.EnsureStreams(ctx, js, events.StreamConfig{}); err != nil {
		t.Fatal(err)
	}
	e := &env{etcd: etcd, cli: etcd.Client, js: js}
	e.startPublisher(t, publish.PublisherConfig{AckTimeout: time.Second, SessionTTL: 2 * time.Second})
	var lastRev int64
	for i := range 600 {
		name := fmt.Sprintf("p%d", i%40)
		key := "/registry/pods/default/" + name
		verb := "create"
		if i >= 40 {
			verb = "update"
		}
		rev := mustWrite(t, e.cli, key, pod("default", name, "n1", i), meta(key, verb, "writer"))
		lastRev = rev
		if i == 200 || i == 400 {
			n.Close()
			n = start()
		}
	}
	e.waitPublished(t, lastRev)
	verifyOK(t, e)
	n.Close()
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
