package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/projections/history/store"
	"github.com/cairn-dev/cairn/services/embedded"
)

// PadKey is the etcd key replay writes to fill revisions that changed no
// API object (elections, compaction markers): it is outside /registry/, so
// the publisher and Verify ignore it.
const PadKey = "/cairn/replay/pad"

// ErrNotEmpty means the destination already holds an etcd data directory.
var ErrNotEmpty = errors.New("replay: destination data directory is not empty")

// Config configures a replay.
type Config struct {
	// JS reads the source log (streams CAIRN and CAIRN_LEASES).
	JS jetstream.JetStream
	// DataDir is the destination, laid out as `cairn up` expects:
	// <DataDir>/etcd and <DataDir>/nats. Neither may exist yet.
	DataDir string
	// ToRev stops after this revision; ToTime after the last event at or
	// before this time. Both zero: the whole log.
	ToRev  events.Revision
	ToTime time.Time
	// Fsync makes every etcd commit durable; without it replay syncs the
	// file system once at the end.
	Fsync bool
	Log   *slog.Logger
}

// Report is what a replay did.
type Report struct {
	Events    int             `json:"events"`
	Revisions int             `json:"revisions"`
	Pads      int             `json:"pads"`
	Head      events.Revision `json:"head"`
	Seconds   float64         `json:"seconds"`
	// EventsPerSecond counts log events applied per second of the whole
	// run (reading, etcd and the copy of the log).
	EventsPerSecond float64 `json:"eventsPerSecond"`
}

func (c *Config) stop(e *events.Event) bool {
	if c.ToRev > 0 && e.Revision > c.ToRev {
		return true
	}
	return !c.ToTime.IsZero() && e.Time.After(c.ToTime)
}

// Run replays the log into cfg.DataDir: it starts an embedded etcd there
// and applies every logged revision up to the target as one etcd
// transaction (the objects of that revision and their events.WriteMeta
// under events.MetaKey, as the apiserver wrote them), padding revisions the
// log has no event for, so that every object gets back its revision and
// resourceVersion. It also copies the replayed events into a fresh
// embedded NATS store there, so the publisher of `cairn up` finds the log
// ending at the replayed head and resumes after it, and `cairn events
// verify` sees the same events it would have seen on the original.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	for _, d := range []string{"etcd", "nats"} {
		if ents, err := os.ReadDir(filepath.Join(cfg.DataDir, d)); err == nil && len(ents) > 0 {
			return nil, fmt.Errorf("%w: %s", ErrNotEmpty, filepath.Join(cfg.DataDir, d))
		}
	}
	start := time.Now()
	dst, err := openDest(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer dst.close()
	leases, err := readLeases(ctx, cfg)
	if err != nil {
		return nil, err
	}
	a := &applier{cfg: &cfg, dst: dst, leases: leases, rep: &Report{}}
	if err := a.run(ctx); err != nil {
		return nil, err
	}
	if err := dst.flush(ctx); err != nil {
		return nil, err
	}
	rep := a.rep
	rep.Seconds = time.Since(start).Seconds()
	if rep.Seconds > 0 {
		rep.EventsPerSecond = float64(rep.Events) / rep.Seconds
	}
	cfg.Log.Info("replay: done", "events", rep.Events, "head", rep.Head, "pads", rep.Pads, "seconds", rep.Seconds)
	return rep, nil
}

// dest is the destination etcd and log.
type dest struct {
	etcd *embedded.Etcd
	cli  *clientv3.Client
	nats *embedded.NATS
	nc   *nats.Conn
	js   jetstream.JetStream
	futs []jetstream.PubAckFuture
}

func openDest(ctx context.Context, cfg Config) (_ *dest, err error) {
	d := &dest{}
	defer func() {
		if err != nil {
			d.close()
		}
	}()
	if d.etcd, err = embedded.StartEtcd(ctx, embedded.EtcdConfig{Dir: filepath.Join(cfg.DataDir, "etcd"), NoFsync: !cfg.Fsync}); err != nil {
		return nil, fmt.Errorf("replay: etcd: %w", err)
	}
	d.cli, err = clientv3.New(clientv3.Config{Endpoints: []string{d.etcd.Endpoint()}, DialTimeout: 10 * time.Second,
		MaxCallSendMsgSize: embedded.MaxRequestBytes, Logger: zap.NewNop()})
	if err != nil {
		return nil, fmt.Errorf("replay: etcd client: %w", err)
	}
	if d.nats, err = embedded.StartNATS(embedded.NATSConfig{StoreDir: filepath.Join(cfg.DataDir, "nats"), Port: -1}); err != nil {
		return nil, fmt.Errorf("replay: nats: %w", err)
	}
	if d.nc, err = d.nats.Connect(nats.Name("cairn-replay")); err != nil {
		return nil, fmt.Errorf("replay: nats: %w", err)
	}
	if d.js, err = jetstream.New(d.nc); err != nil {
		return nil, fmt.Errorf("replay: jetstream: %w", err)
	}
	if err := events.EnsureStreams(ctx, d.js, events.StreamConfig{}); err != nil {
		return nil, fmt.Errorf("replay: streams: %w", err)
	}
	return d, nil
}

func (d *dest) close() {
	if d.nc != nil {
		d.nc.Close()
	}
	if d.nats != nil {
		d.nats.Close()
	}
	if d.cli != nil {
		d.cli.Close()
	}
	if d.etcd != nil {
		d.etcd.Close()
	}
}

// copyMsg republishes a source message on the destination log, pipelined.
func (d *dest) copyMsg(ctx context.Context, m *nats.Msg) error {
	out := &nats.Msg{Subject: m.Subject, Data: m.Data, Header: nats.Header{}}
	for _, h := range []string{jetstream.MsgIDHeader, events.MsgHeaderRevision, events.MsgHeaderType} {
		out.Header.Set(h, m.Header.Get(h))
	}
	f, err := d.js.PublishMsgAsync(out)
	if err != nil {
		return fmt.Errorf("replay: copy event: %w", err)
	}
	d.futs = append(d.futs, f)
	if len(d.futs) >= 2000 { // below the client's 4000 outstanding async publishes
		return d.waitAcks(ctx)
	}
	return nil
}

func (d *dest) waitAcks(ctx context.Context) error {
	for _, f := range d.futs {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			return fmt.Errorf("replay: copy event: %w", err)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	d.futs = d.futs[:0]
	return nil
}

func (d *dest) flush(ctx context.Context) error {
	if err := d.waitAcks(ctx); err != nil {
		return err
	}
	return nil
}

// srcMsg is one source event with its message.
type srcMsg struct {
	pos store.Pos
	ev  *events.Event
	msg *nats.Msg
}

func decode(m jetstream.Msg) (*srcMsg, error) {
	var e events.Event
	if err := json.Unmarshal(m.Data(), &e); err != nil {
		return nil, fmt.Errorf("replay: decode event: %w", err)
	}
	pos := store.Pos{Rev: e.Revision}
	if id := m.Headers().Get(jetstream.MsgIDHeader); id != "" {
		if p, err := store.ParsePos(id); err == nil {
			pos = p
		}
	}
	return &srcMsg{pos: pos, ev: &e, msg: &nats.Msg{Subject: m.Subject(), Data: m.Data(), Header: m.Headers()}}, nil
}

// readAll calls fn for every message of stream, in order, until fn
// returns false or the stream's end as of the start.
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
	cons, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		return fmt.Errorf("replay: stream %s: %w", stream, err)
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(4096))
	if err != nil {
		return fmt.Errorf("replay: stream %s: %w", stream, err)
	}
	defer it.Stop()
	for {
		m, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			return fmt.Errorf("replay: read %s: %w", stream, err)
		}
		md, err := m.Metadata()
		if err != nil {
			return fmt.Errorf("replay: read %s: %w", stream, err)
		}
		sm, err := decode(m)
		if err != nil {
			return err
		}
		more, err := fn(sm)
		if err != nil || !more || md.Sequence.Stream >= info.State.LastSeq {
			return err
		}
	}
}

// readLeases reads the lease stream (the latest state of each lease) up
// to the target, ordered by position.
func readLeases(ctx context.Context, cfg Config) ([]*srcMsg, error) {
	var out []*srcMsg
	err := readAll(ctx, cfg.JS, events.LeaseStream, func(m *srcMsg) (bool, error) {
		if !cfg.stop(m.ev) {
			out = append(out, m)
		}
		return true, nil
	})
	if err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, err
	}
	slices.SortFunc(out, func(a, b *srcMsg) int {
		if a.pos.Less(b.pos) {
			return -1
		}
		return 1
	})
	return out, nil
}

// StripResourceVersion turns an event's object back into the value the
// apiserver stored: the same JSON without metadata.resourceVersion. The
// publisher splices `"resourceVersion":"<rev>"` right after `"metadata":{`;
// when that is how it looks the splice is undone byte for byte, otherwise
// the field is removed from the decoded object.
func StripResourceVersion(obj []byte, rev events.Revision) ([]byte, error) {
	if len(obj) == 0 || string(obj) == "null" {
		return nil, nil
	}
	open := []byte(`"metadata":{`)
	field := []byte(`"resourceVersion":"` + rev.String() + `"`)
	if i := bytes.Index(obj, open); i >= 0 {
		at := i + len(open)
		if bytes.HasPrefix(obj[at:], field) {
			end := at + len(field)
			if end < len(obj) && obj[end] == ',' {
				end++
			}
			out := make([]byte, 0, len(obj)-(end-at))
			return append(append(out, obj[:at]...), obj[end:]...), nil
		}
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(obj, &top); err != nil {
		return nil, fmt.Errorf("replay: object at revision %d: %w", rev, err)
	}
	var md map[string]json.RawMessage
	if err := json.Unmarshal(top["metadata"], &md); err == nil && md != nil {
		delete(md, "resourceVersion")
		top["metadata"], _ = json.Marshal(md)
	}
	return json.Marshal(top)
}
