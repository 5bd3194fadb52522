package apitest

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/oklog/ulid/v2"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/services/apiserver/storage"
	"github.com/cairn-dev/cairn/services/embedded/embeddedtest"
)

// The floor of a create: baselines that bench:api measures in the same run
// as the creates, each the CPU time of this process per operation, so that
// the ratio they leave reachable on this machine can be reported.

// getCPU is the CPU per raw etcd read: gets linearizable reads of 1.5 KB
// values by readers concurrent clients on a fresh fsync etcd, as the
// dry-run create's existence check reads.
func getCPU(b *testing.B, gets int64, readers int) time.Duration {
	b.Helper()
	e := embeddedtest.StartEtcdFsync(b)
	val := string(make([]byte, benchValue))
	for i := range readers {
		if _, err := e.Client.Put(context.Background(), fmt.Sprintf("/bench/%d", i), val); err != nil {
			b.Fatal(err)
		}
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	cpu0 := embeddedtest.ProcessCPU()
	for i := range readers {
		key := fmt.Sprintf("/bench/%d", i)
		wg.Go(func() {
			for next.Add(1) <= gets {
				if _, err := e.Client.Get(context.Background(), key); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	return (embeddedtest.ProcessCPU() - cpu0) / time.Duration(gets)
}

// txnCPU is the CPU per etcd transaction of the shape a create commits
// (storage.Store.Create: the key must be free; the object and its write
// metadata are put together), by writers concurrent clients on a fresh
// fsync etcd, with 1.5 KB objects and the metadata of an authenticated
// create. It also returns the rate those transactions reach.
func txnCPU(b *testing.B, txns int64, writers int) (time.Duration, float64) {
	b.Helper()
	e := embeddedtest.StartEtcdFsync(b)
	st := storage.New(e.Client)
	val := make([]byte, benchValue)
	var next atomic.Int64
	var wg sync.WaitGroup
	cpu0 := embeddedtest.ProcessCPU()
	start := time.Now()
	for range writers {
		wg.Go(func() {
			for {
				n := next.Add(1)
				if n > txns {
					return
				}
				meta := &events.WriteMeta{ID: ulid.Make().String(), Verb: "create", Time: time.Now(),
					Actor:     events.Actor{User: "cairn-admin", Groups: []string{"system:masters", "system:authenticated"}},
					UserAgent: "apitest.test/v0.0.0 (linux/amd64) kubernetes/$Format", SourceIP: "127.0.0.1"}
				key := storage.Key("", "pods", "default", fmt.Sprintf("txn-%06d", n))
				if _, err := st.Create(context.Background(), key, val, meta); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	rate := float64(txns) / time.Since(start).Seconds()
	return (embeddedtest.ProcessCPU() - cpu0) / time.Duration(txns), rate
}

// publishCPU is the CPU per event published to JetStream as the publisher
// publishes: one publisher, 256 publishes in flight, each with its message
// id and the stream's expected last sequence and message id, size bytes,
// to the CAIRN stream's configuration on a fresh server, and acknowledged.
func publishCPU(b *testing.B, msgs, size int) time.Duration {
	b.Helper()
	n := embeddedtest.StartNATS(b)
	// A connection of its own: async publishing leaves goroutines on it.
	nc, err := nats.Connect(n.URL())
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(256))
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := events.EnsureStreams(ctx, js, events.StreamConfig{}); err != nil {
		b.Fatal(err)
	}
	data := make([]byte, size)
	cpu0 := embeddedtest.ProcessCPU()
	prevID := ""
	for i := 1; i <= msgs; i++ {
		ev := events.Event{Revision: events.Revision(i), Resource: "pods", Namespace: "default", Name: fmt.Sprintf("bench-%06d", i)}
		m := nats.NewMsg(ev.Subject())
		m.Data = data
		id := strconv.Itoa(i)
		m.Header.Set(events.MsgHeaderRevision, id)
		m.Header.Set(events.MsgHeaderType, string(events.Added))
		if _, err := js.PublishMsgAsync(m, jetstream.WithMsgID(id), jetstream.WithExpectStream(events.Stream),
			jetstream.WithExpectLastSequence(uint64(i-1)), jetstream.WithExpectLastMsgID(prevID)); err != nil {
			b.Fatal(err)
		}
		prevID = id
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-ctx.Done():
		b.Fatal("publishes not acknowledged")
	}
	cpu := embeddedtest.ProcessCPU() - cpu0
	st, err := js.Stream(ctx, events.Stream)
	if err != nil {
		b.Fatal(err)
	}
	if info, err := st.Info(ctx); err != nil || info.State.Msgs != uint64(msgs) {
		b.Fatalf("stream holds %v messages, want %d (%v)", info, msgs, err)
	}
	return cpu / time.Duration(msgs)
}
