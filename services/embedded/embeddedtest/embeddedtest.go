// Package embeddedtest starts real etcd and NATS servers for tests, the way
// etcd's and nats-server's own tests do, and stops them with t.Cleanup.
package embeddedtest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cairn-dev/cairn/services/embedded"
)

// Etcd is a test etcd member with a connected client.
type Etcd struct {
	*embedded.Etcd
	Client *clientv3.Client
}

// StartEtcd starts an etcd member in t.TempDir(). Set fsync to false unless
// the test measures durability.
func StartEtcd(t testing.TB) *Etcd {
	t.Helper()
	return startEtcd(t, true)
}

func startEtcd(t testing.TB, noFsync bool) *Etcd {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e, err := embedded.StartEtcd(ctx, embedded.EtcdConfig{Dir: t.TempDir(), NoFsync: noFsync})
	if err != nil {
		t.Fatalf("start etcd: %v", err)
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:          []string{e.Endpoint()},
		DialTimeout:        10 * time.Second,
		MaxCallSendMsgSize: embedded.MaxRequestBytes,
		Logger:             nopZap(),
	})
	if err != nil {
		e.Close()
		t.Fatalf("etcd client: %v", err)
	}
	t.Cleanup(func() {
		cli.Close()
		e.Close()
	})
	return &Etcd{Etcd: e, Client: cli}
}

// NATS is a test NATS server with JetStream and a connected client.
type NATS struct {
	*embedded.NATS
	Conn *nats.Conn
}

// StartNATS starts a NATS server with JetStream in t.TempDir() on a free port.
func StartNATS(t testing.TB) *NATS {
	t.Helper()
	n, err := embedded.StartNATS(embedded.NATSConfig{StoreDir: t.TempDir(), Port: -1})
	if err != nil {
		t.Fatalf("start nats: %v", err)
	}
	nc, err := nats.Connect(n.URL())
	if err != nil {
		n.Close()
		t.Fatalf("nats connect: %v", err)
	}
	t.Cleanup(func() {
		nc.Close()
		n.Close()
	})
	return &NATS{NATS: n, Conn: nc}
}

// StartEtcdFsync is StartEtcd with fsync on, for benchmarks that compare
// against a durable control plane.
func StartEtcdFsync(t testing.TB) *Etcd {
	t.Helper()
	return startEtcd(t, false)
}

// PutRate is the benchmarks' baseline: the puts per second that writers
// concurrent clients reach on a fresh fsync etcd (the control plane's
// settings), writing puts values of size bytes in all.
func PutRate(t testing.TB, puts int64, writers, size int) float64 {
	t.Helper()
	e := StartEtcdFsync(t)
	val := string(make([]byte, size))
	var next atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for {
				n := next.Add(1)
				if n > puts {
					return
				}
				if _, err := e.Client.Put(context.Background(), fmt.Sprintf("/bench/%08d", n), val); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	return float64(puts) / time.Since(start).Seconds()
}

// ProcessCPU is the CPU time (user and system) this process has used. The
// benchmarks report CPU per operation next to PutRate's baseline: unlike
// rates, it hardly grows with the load others put on a shared machine.
func ProcessCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
