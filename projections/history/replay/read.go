package replay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/projections/history/store"
	"github.com/cairn-dev/cairn/schemas/codec"
)

const (
	// fetchMessages is how many messages the ordered consumer asks
	// JetStream for at a time.
	fetchMessages = 8192
	// batchSize is how many messages one decoding worker takes at a time.
	batchSize = 256
)

// srcMsg is one source event, decoded, with what replay writes for it.
type srcMsg struct {
	pos store.Pos
	ev  *events.Event
	msg *nats.Msg
	// key is the event's etcd key, val the value to put there (the object
	// without its resourceVersion); del for a delete.
	key string
	val []byte
	del bool
	// meta is the events.WriteMeta of the event's write, for the first
	// event of a revision.
	meta []byte
}

// decode decodes a message and prepares its etcd writes.
func decode(m *events.Msg) (*srcMsg, error) {
	var e events.Event
	if err := codec.Unmarshal(m.Data, &e); err != nil {
		return nil, fmt.Errorf("replay: decode event: %w", err)
	}
	pos := store.Pos{Rev: e.Revision}
	if id := m.Header.Get(jetstream.MsgIDHeader); id != "" {
		if p, err := store.ParsePos(id); err == nil {
			pos = p
		}
	}
	sm := &srcMsg{pos: pos, ev: &e, msg: &nats.Msg{Subject: m.Subject, Data: m.Data, Header: m.Header},
		key: events.RegistryKey(e.Group, e.Resource, e.Namespace, e.Name), del: e.Type == events.Deleted}
	if !sm.del {
		val, err := StripResourceVersion(e.Object, e.Revision)
		if err != nil {
			return nil, err
		}
		sm.val = val
	}
	if pos.Idx == 0 {
		meta, err := json.Marshal(writeMeta(&e))
		if err != nil {
			return nil, fmt.Errorf("replay: revision %d: %w", e.Revision, err)
		}
		sm.meta = meta
	}
	return sm, nil
}

// batch is a run of consecutive messages of a stream, decoded by one
// worker.
type batch struct {
	raw  []*events.Msg
	msgs []*srcMsg
	err  error
	done chan struct{}
}

func (b *batch) decode() {
	defer close(b.done)
	b.msgs = make([]*srcMsg, 0, len(b.raw))
	for _, m := range b.raw {
		sm, err := decode(m)
		if err != nil {
			b.err = err
			return
		}
		b.msgs = append(b.msgs, sm)
	}
	b.raw = nil
}

// readAll calls fn for every message of stream, in order, until fn
// returns false or the stream's end as of the start. Messages are fetched
// on one goroutine and decoded on GOMAXPROCS others, batchSize at a time,
// while fn runs; readAll stops them all before it returns.
func readAll(ctx context.Context, js jetstream.JetStream, stream string, fn func(*srcMsg) (bool, error)) error {
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return fmt.Errorf("replay: stream %s: %w", stream, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		return fmt.Errorf("replay: stream %s: %w", stream, err)
	}
	if info.State.Msgs == 0 {
		return nil
	}
	if stream == events.Stream && info.State.FirstSeq > 1 {
		return fmt.Errorf("replay: stream %s has lost its first %d messages: the log is not complete", stream, info.State.FirstSeq-1)
	}
	r, err := events.NewReader(ctx, js, events.ReadOptions{Stream: stream, Buffer: fetchMessages})
	if err != nil {
		return fmt.Errorf("replay: %w", err)
	}
	defer r.Stop()

	ctx, cancel := context.WithCancel(ctx)
	workers := runtime.GOMAXPROCS(0)
	ordered := make(chan *batch, 4*workers)
	work := make(chan *batch, 4*workers)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		for range ordered { // unblock the fetcher
		}
		wg.Wait()
	}()
	for range workers {
		wg.Go(func() {
			for b := range work {
				b.decode()
			}
		})
	}
	var fetchErr error
	wg.Go(func() {
		defer close(ordered)
		defer close(work)
		fetchErr = fetch(ctx, r, work, ordered)
	})
	for b := range ordered {
		select {
		case <-b.done:
		case <-ctx.Done():
			return ctx.Err()
		}
		if b.err != nil {
			return b.err
		}
		for _, m := range b.msgs {
			if more, err := fn(m); err != nil || !more {
				return err
			}
		}
	}
	return fetchErr
}

// fetch reads the stream's messages, up to its end as of the start, and
// sends them in batches to the workers (work) and, in the same order, to
// the reader (ordered).
func fetch(ctx context.Context, r *events.Reader, work, ordered chan<- *batch) error {
	b := &batch{done: make(chan struct{})}
	for {
		m, err := r.Next(ctx)
		end := errors.Is(err, io.EOF)
		if err != nil && !end {
			return fmt.Errorf("replay: %w", err)
		}
		if m != nil {
			b.raw = append(b.raw, m)
		}
		if len(b.raw) < batchSize && !end {
			continue
		}
		for _, ch := range []chan<- *batch{ordered, work} {
			select {
			case ch <- b:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if end {
			return nil
		}
		b = &batch{raw: make([]*events.Msg, 0, batchSize), done: make(chan struct{})}
	}
}
