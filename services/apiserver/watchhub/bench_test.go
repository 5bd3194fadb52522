package watchhub

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/events"
)

const benchWatchers = 100

// drain starts n watchers of all pods and returns a WaitGroup that is done
// when each has received want events.
func drain(b *testing.B, h *Hub, n, want int) *sync.WaitGroup {
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		w, err := h.Watch(context.Background(), Request{Resource: "pods", From: 0})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(w.Stop)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for got := 0; got < want; got++ {
				if _, ok := <-w.Events(); !ok {
					b.Errorf("watch ended: %v", w.Err())
					return
				}
			}
		}()
	}
	return &wg
}

// BenchmarkFanout measures the hub alone: decoded events applied to the
// tail and received by 100 watchers (no NATS).
func BenchmarkFanout(b *testing.B) {
	h := NewHub(nil, Config{WatcherBuffer: b.N + 1}, nil)
	t := h.main
	t.mu.Lock()
	t.floorKnown = true
	t.markReadyLocked()
	t.mu.Unlock()
	recs := make([]*record, b.N)
	for i := range recs {
		recs[i] = decodedRecord(uint64(i+1), &events.Event{Revision: events.Revision(i + 1), Resource: "pods", Namespace: "a", Name: fmt.Sprint("p", i%100)})
	}
	wg := drain(b, h, benchWatchers, b.N)
	b.ResetTimer()
	start := time.Now()
	for i, rec := range recs {
		t.apply(uint64(i+1), rec, true)
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "events/s")
	b.ReportMetric(float64(b.N*benchWatchers)/time.Since(start).Seconds(), "deliveries/s")
}

// BenchmarkFanoutNATS measures the whole path: events published to
// JetStream, tailed by the hub and received by 100 watchers.
func BenchmarkFanoutNATS(b *testing.B) {
	e := newEnv(b)
	h := startHub(b, e, Config{WatcherBuffer: b.N + 1})
	if _, err := h.Head(events.Stream); err != nil {
		b.Fatal(err)
	}
	msgs := make([]*nats.Msg, b.N)
	for i := range msgs {
		ev := &events.Event{Revision: events.Revision(i + 1), Type: events.Added, Version: "v1", Resource: "pods",
			Namespace: "a", Name: fmt.Sprint("p", i%100), Object: json.RawMessage(`{"kind":"Pod"}`)}
		data, _ := json.Marshal(ev)
		m := nats.NewMsg(ev.Subject())
		m.Data = data
		m.Header.Set(events.MsgHeaderRevision, ev.Revision.String())
		m.Header.Set(jetstream.MsgIDHeader, ev.Revision.String())
		msgs[i] = m
	}
	// A connection of its own: async publishing leaves goroutines on it.
	nc, err := nats.Connect(e.url)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(nc.Close)
	pjs, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(512))
	if err != nil {
		b.Fatal(err)
	}
	wg := drain(b, h, benchWatchers, b.N)
	b.ResetTimer()
	start := time.Now()
	for _, m := range msgs {
		if _, err := pjs.PublishMsgAsync(m, jetstream.WithStallWait(time.Minute)); err != nil {
			b.Fatal(err)
		}
	}
	select {
	case <-pjs.PublishAsyncComplete():
	case <-time.After(time.Minute):
		b.Fatal("publish did not complete")
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "events/s")
}
