package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/events"
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
	// files of DataDir once at the end.
	Fsync bool
	Log   *slog.Logger
}

// Report is what a replay did.
type Report struct {
	Events    int             `json:"events"`
	Revisions int             `json:"revisions"`
	Pads      int             `json:"pads"`
	Head      events.Revision `json:"head"`
	// Reordered counts the transactions etcd applied before their
	// predecessor, which replay detected and committed again.
	Reordered int     `json:"reordered"`
	Seconds   float64 `json:"seconds"`
	// SyncSeconds is the part of Seconds spent syncing the files at the
	// end (without Config.Fsync).
	SyncSeconds float64 `json:"syncSeconds,omitempty"`
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

// Run replays the log into cfg.DataDir: it starts an etcd member there
// and applies every logged revision up to the target as one etcd
// transaction (the objects of that revision and their events.WriteMeta
// under events.MetaKey, as the apiserver wrote them), padding revisions the
// log has no event for, so that every object gets back its revision and
// resourceVersion. It also copies the replayed events into a fresh
// embedded NATS store there, so the publisher of `cairn up` finds the log
// ending at the replayed head and resumes after it, and `cairn events
// verify` sees the same events it would have seen on the original.
//
// The log is read and decoded in parallel, and the transactions are
// pipelined through an in-process etcd client, each conditioned on the
// revision before it (see chain), so that none lands anywhere but on its
// own revision. A revision that cannot be committed where the log has it
// fails the replay with ErrDiverged.
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
	rep, err := replayInto(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if !cfg.Fsync {
		// Neither etcd nor the copy of the log synced as they wrote: sync
		// their files once, now that both have closed them.
		synced := time.Now()
		if err := syncTree(cfg.DataDir); err != nil {
			return nil, err
		}
		rep.SyncSeconds = time.Since(synced).Seconds()
	}
	rep.Seconds = time.Since(start).Seconds()
	if rep.Seconds > 0 {
		rep.EventsPerSecond = float64(rep.Events) / rep.Seconds
	}
	cfg.Log.Info("replay: done", "events", rep.Events, "head", rep.Head, "pads", rep.Pads,
		"reordered", rep.Reordered, "seconds", rep.Seconds)
	return rep, nil
}

// replayInto does the replay, with the destination open.
func replayInto(ctx context.Context, cfg Config) (*Report, error) {
	dst, err := openDest(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer dst.close()
	leases, err := readLeases(ctx, cfg)
	if err != nil {
		return nil, err
	}
	seeds, err := leaseSeeds(ctx, cfg.JS, leases)
	if err != nil {
		return nil, err
	}
	a := &applier{cfg: &cfg, dst: dst, leases: leases, seeds: seeds, rep: &Report{}}
	if err := a.run(ctx); err != nil {
		return nil, err
	}
	if err := dst.waitAcks(ctx, 0); err != nil {
		return nil, err
	}
	return a.rep, nil
}

// syncTree fsyncs every file and directory under dir.
func syncTree(dir string) error {
	return filepath.WalkDir(dir, func(path string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := f.Sync(); err != nil {
			return fmt.Errorf("replay: sync %s: %w", path, err)
		}
		return nil
	})
}

// dest is the destination etcd and log.
type dest struct {
	etcd    *member
	js      jetstream.JetStream
	futs    []jetstream.PubAckFuture // the copies not acknowledged yet, in order
	closers []func()                 // of what is open, in the order opened
}

// maxPending bounds the copies in flight, below the client's 4000
// outstanding asynchronous publishes.
const maxPending = 2000

func openDest(ctx context.Context, cfg Config) (_ *dest, err error) {
	d := &dest{}
	defer func() {
		if err != nil {
			d.close()
		}
	}()
	if d.etcd, err = startMember(ctx, filepath.Join(cfg.DataDir, "etcd"), cfg.Fsync); err != nil {
		return nil, err
	}
	d.closers = append(d.closers, d.etcd.close)
	n, err := embedded.StartNATS(embedded.NATSConfig{StoreDir: filepath.Join(cfg.DataDir, "nats"), Port: -1})
	if err != nil {
		return nil, fmt.Errorf("replay: nats: %w", err)
	}
	d.closers = append(d.closers, n.Close)
	nc, err := n.Connect(nats.Name("cairn-replay"))
	if err != nil {
		return nil, fmt.Errorf("replay: nats: %w", err)
	}
	d.closers = append(d.closers, nc.Close)
	if d.js, err = jetstream.New(nc); err != nil {
		return nil, fmt.Errorf("replay: jetstream: %w", err)
	}
	if err := events.EnsureStreams(ctx, d.js, events.StreamConfig{}); err != nil {
		return nil, fmt.Errorf("replay: streams: %w", err)
	}
	return d, nil
}

func (d *dest) close() {
	for _, c := range slices.Backward(d.closers) {
		c()
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
	return d.waitAcks(ctx, maxPending)
}

// waitAcks waits for the oldest copies until at most pending are not
// acknowledged.
func (d *dest) waitAcks(ctx context.Context, pending int) error {
	for len(d.futs) > pending {
		select {
		case <-d.futs[0].Ok():
		case err := <-d.futs[0].Err():
			return fmt.Errorf("replay: copy event: %w", err)
		case <-ctx.Done():
			return ctx.Err()
		}
		d.futs[0] = nil
		d.futs = d.futs[1:]
	}
	return nil
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
