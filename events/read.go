package events

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/cairn-dev/cairn/schemas/codec"
)

// ReadOptions say what a Reader reads from one stream, and from where.
type ReadOptions struct {
	// Stream is the stream to read (Stream or LeaseStream).
	Stream string
	// Filters are subject filters applied on the server (see Filter); none
	// reads every subject.
	Filters []string
	// FromSeq is the first stream sequence delivered; 0 starts at the
	// oldest message the stream keeps.
	FromSeq uint64
	// Follow keeps delivering new messages; otherwise Next returns io.EOF
	// after the last matching message stored when the Reader was opened.
	Follow bool
	// Buffer is how many messages the client pulls ahead; 0 is the client
	// library's default.
	Buffer int
}

// Msg is one message read from the log.
type Msg struct {
	// Seq is the message's stream sequence.
	Seq uint64
	// Pending is how many matching messages followed it when it was
	// delivered.
	Pending uint64
	Subject string
	Header  nats.Header
	Data    []byte
}

// Position is where the message stands on the log (its Nats-Msg-Id).
func (m *Msg) Position() (Position, error) { return MsgPosition(m.Header) }

// Event decodes the message's envelope.
func (m *Msg) Event() (*Event, error) {
	var e Event
	if err := codec.Unmarshal(m.Data, &e); err != nil {
		return nil, fmt.Errorf("events: seq %d: %w", m.Seq, err)
	}
	return &e, nil
}

// consumerInactive is how long the server keeps the consumer of a Reader
// whose client went away without stopping it.
const consumerInactive = 30 * time.Second

// Reader reads one stream in order through an ordered consumer, filtered
// on the server. It is the one way the log is read: controllers' caches,
// the watch hub, the history projection, replay, Tail and Verify all read
// through it. A Reader is used by one goroutine at a time; Stop releases
// it and deletes its consumer on the server.
type Reader struct {
	js     jetstream.JetStream
	stream string
	cons   jetstream.Consumer
	it     jetstream.MessagesContext
	follow bool
	// end is the last sequence to deliver without Follow; done is set
	// once it has been delivered (or the stream had nothing to deliver).
	end  uint64
	done bool
}

// NewReader opens a Reader. Without Follow it first reads the stream's
// last sequence: the Reader ends there.
func NewReader(ctx context.Context, js jetstream.JetStream, opts ReadOptions) (*Reader, error) {
	r := &Reader{js: js, stream: opts.Stream, follow: opts.Follow}
	if !opts.Follow {
		s, err := js.Stream(ctx, opts.Stream)
		if err != nil {
			return nil, fmt.Errorf("events: read %s: %w", opts.Stream, err)
		}
		info, err := s.Info(ctx)
		if err != nil {
			return nil, fmt.Errorf("events: read %s: %w", opts.Stream, err)
		}
		r.end = info.State.LastSeq
		if info.State.Msgs == 0 || (opts.FromSeq > 0 && opts.FromSeq > r.end) {
			r.done = true
			return r, nil
		}
	}
	cfg := jetstream.OrderedConsumerConfig{
		FilterSubjects: opts.Filters,
		// The prefix lets a create cut short in flight be undone, and the
		// threshold bounds how long a consumer whose client died lingers.
		NamePrefix:        nuid.Next(),
		InactiveThreshold: consumerInactive,
	}
	if opts.FromSeq > 0 {
		cfg.DeliverPolicy = jetstream.DeliverByStartSequencePolicy
		cfg.OptStartSeq = opts.FromSeq
	}
	// The create does not follow ctx: a request cancelled in flight may
	// still create the consumer on the server.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	cons, err := js.OrderedConsumer(cctx, opts.Stream, cfg)
	if err != nil {
		// The library names its first consumer <prefix>_1.
		r.deleteConsumer(cfg.NamePrefix + "_1")
		return nil, fmt.Errorf("events: read %s: %w", opts.Stream, err)
	}
	r.cons = cons
	if ci := cons.CachedInfo(); !opts.Follow && ci != nil && ci.NumPending == 0 {
		r.done = true
		return r, nil
	}
	var pull []jetstream.PullMessagesOpt
	if opts.Buffer > 0 {
		pull = append(pull, jetstream.PullMaxMessages(opts.Buffer))
	}
	if r.it, err = cons.Messages(pull...); err != nil {
		r.Stop()
		return nil, fmt.Errorf("events: read %s: %w", opts.Stream, err)
	}
	return r, nil
}

// Next returns the next message. Without Follow it returns io.EOF after
// the last one; it returns ctx's error (wrapped) when ctx ends first, and
// the Reader may be used again after a deadline.
func (r *Reader) Next(ctx context.Context) (*Msg, error) {
	if r.done {
		return nil, io.EOF
	}
	msg, err := r.it.Next(jetstream.NextContext(ctx))
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("events: read %s: %w", r.stream, ctx.Err())
		}
		return nil, fmt.Errorf("events: read %s: %w", r.stream, err)
	}
	md, err := msg.Metadata()
	if err != nil {
		return nil, fmt.Errorf("events: read %s: %w", r.stream, err)
	}
	m := &Msg{Seq: md.Sequence.Stream, Pending: md.NumPending, Subject: msg.Subject(), Header: msg.Headers(), Data: msg.Data()}
	if !r.follow && (m.Pending == 0 || m.Seq >= r.end) {
		r.done = true
	}
	return m, nil
}

// Stop ends the Reader and deletes its consumer from the server (the
// client library leaves it to expire otherwise). It may be called more
// than once.
func (r *Reader) Stop() {
	if r.it != nil {
		r.it.Stop()
		r.it = nil
	}
	if r.cons != nil {
		if info := r.cons.CachedInfo(); info != nil {
			r.deleteConsumer(info.Name)
		}
		r.cons = nil
	}
	r.done = true
}

func (r *Reader) deleteConsumer(name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// A failure is harmless: the server removes it after consumerInactive.
	_ = r.js.DeleteConsumer(ctx, r.stream, name)
}

// Read calls fn for every message opts selects, in order, until the end
// (without Follow; then it returns nil), fn's error, or ctx's.
func Read(ctx context.Context, js jetstream.JetStream, opts ReadOptions, fn func(*Msg) error) error {
	r, err := NewReader(ctx, js, opts)
	if err != nil {
		return err
	}
	defer r.Stop()
	for {
		m, err := r.Next(ctx)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := fn(m); err != nil {
			return err
		}
	}
}
