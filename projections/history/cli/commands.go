package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/projections/history/audit"
	"github.com/cairn-dev/cairn/projections/history/replay"
	"github.com/cairn-dev/cairn/projections/history/store"
	"github.com/cairn-dev/cairn/projections/history/timeline"
	"github.com/cairn-dev/cairn/projections/history/travel"
	"github.com/cairn-dev/cairn/services/embedded/endpoints"
)

// done maps -h to success.
func done(err error) error {
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	return err
}

// Timeline is `cairn timeline <kind>/<name> [-n ns] [--uid U] [-o json] [--follow]`.
func Timeline(ctx context.Context, env Env, args []string, stdout io.Writer) error {
	var c conn
	var uid string
	var follow bool
	fs := env.Flags
	c.registerObject(env)
	fs.StringVar(&uid, "uid", "", "this incarnation of the name (default the latest)")
	fs.BoolVar(&follow, "follow", false, "keep printing new steps")
	cl, q, err := c.openObject(ctx, args, nil)
	if err != nil {
		return done(err)
	}
	defer cl.close()
	q.Set("uid", uid)
	var last store.Pos
	for first := true; ; first = false {
		var tl timeline.Timeline
		if err := cl.call(ctx, "timeline", q, &tl); err != nil {
			return err
		}
		if c.asJSON() {
			if err := json.NewEncoder(stdout).Encode(&tl); err != nil {
				return err
			}
		} else {
			if first {
				if err := tl.WriteHeader(stdout); err != nil {
					return err
				}
			}
			if last, err = tl.WriteSteps(stdout, last); err != nil {
				return err
			}
		}
		if !follow {
			return nil
		}
		// The uid stays fixed so a follow does not jump to a new object
		// of the same name.
		if len(tl.Objects) > 0 {
			q.Set("uid", tl.Objects[0].UID)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// Audit is `cairn audit [--user U] [--verb V] [--kind K] [-n N] [--name X]
// [--since D|T] [--until T] [--limit N] [-o json]`.
func Audit(ctx context.Context, env Env, args []string, stdout io.Writer) error {
	var c conn
	q := url.Values{}
	fs := env.Flags
	c.register(env)
	for _, f := range []struct{ name, usage string }{
		{"user", "only changes by this user"}, {"verb", "only this verb (create, update, patch, delete, ...)"},
		{"kind", "only this kind or resource"}, {"namespace", "only this namespace"}, {"name", "only objects of this name"},
		{"since", "only changes since this duration ago (10m) or RFC 3339 time"},
		{"until", "only changes until this duration ago or RFC 3339 time"}, {"limit", "at most this many, the newest"},
	} {
		fs.Func(f.name, f.usage, func(s string) error { q.Set(f.name, s); return nil })
	}
	fs.Func("n", "short for --namespace", func(s string) error { q.Set("namespace", s); return nil })
	if _, err := parse(fs, args, 0, 0, nil); err != nil {
		return done(err)
	}
	cl, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer cl.close()
	var res audit.Result
	if err := cl.call(ctx, "audit", q, &res); err != nil {
		return err
	}
	if c.asJSON() {
		return json.NewEncoder(stdout).Encode(&res)
	}
	return res.WriteText(stdout)
}

// Get is `cairn get <kind> [name] --at <revision|RFC3339> [-n ns] [-o json]`.
func Get(ctx context.Context, env Env, args []string, stdout io.Writer) error {
	var c conn
	var ns, at string
	fs := env.Flags
	c.register(env)
	fs.StringVar(&ns, "n", "", "namespace (default all for a list, required for namespaced objects)")
	fs.StringVar(&at, "at", "", "revision or RFC 3339 time (default the head)")
	pos, err := parse(fs, args, 1, 2, nil)
	if err != nil {
		return done(err)
	}
	cl, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer cl.close()
	q := url.Values{"kind": {pos[0]}, "namespace": {ns}, "at": {at}}
	if len(pos) == 2 {
		q.Set("name", pos[1])
		var st travel.State
		if err := cl.call(ctx, "get", q, &st); err != nil {
			return err
		}
		if c.asJSON() {
			return json.NewEncoder(stdout).Encode(&st)
		}
		return writeIndented(stdout, st.Object)
	}
	var list struct {
		Revision int64          `json:"revision"`
		Items    []travel.State `json:"items"`
	}
	if err := cl.call(ctx, "get", q, &list); err != nil {
		return err
	}
	if c.asJSON() {
		return json.NewEncoder(stdout).Encode(&list)
	}
	fmt.Fprintf(stdout, "%-20s %-50s %s\n", "NAMESPACE", "NAME", "REVISION")
	for _, it := range list.Items {
		fmt.Fprintf(stdout, "%-20s %-50s %d\n", it.Key.Namespace, it.Key.Name, it.Revision)
	}
	return nil
}

func writeIndented(w io.Writer, raw json.RawMessage) error {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return err
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// Diff is `cairn diff <kind>/<name> --from T1 --to T2 [-n ns] [-o json]`.
func Diff(ctx context.Context, env Env, args []string, stdout io.Writer) error {
	var c conn
	var from, to string
	fs := env.Flags
	c.registerObject(env)
	fs.StringVar(&from, "from", "", "revision or RFC 3339 time (required)")
	fs.StringVar(&to, "to", "", "revision or RFC 3339 time (default the head)")
	cl, q, err := c.openObject(ctx, args, func() bool { return from != "" })
	if err != nil {
		return done(err)
	}
	defer cl.close()
	q.Set("from", from)
	q.Set("to", to)
	var d travel.Delta
	if err := cl.call(ctx, "diff", q, &d); err != nil {
		return err
	}
	if c.asJSON() {
		return json.NewEncoder(stdout).Encode(&d)
	}
	fmt.Fprintf(stdout, "%s/%s: revision %d (object at %d) -> %d (object at %d)\n", q.Get("kind"), q.Get("name"), d.From, d.FromRev, d.To, d.ToRev)
	for _, ch := range d.Changes {
		fmt.Fprintf(stdout, "  %s\n", ch)
	}
	return nil
}

// Replay is `cairn replay --to <revision|RFC3339> --data-dir D
// [--nats-url U | --from-data-dir S] [--fsync]`.
// It takes no shared flags: its --data-dir is the directory it builds.
func Replay(ctx context.Context, env Env, args []string, stdout io.Writer) error {
	var to, dataDir, natsURL, from string
	var fsync bool
	fs := env.Flags
	fs.StringVar(&to, "to", "", "last revision or RFC 3339 time to replay (default the whole log)")
	fs.StringVar(&dataDir, "data-dir", "", "new data directory to build (required; must not hold etcd/ or nats/)")
	fs.StringVar(&natsURL, "nats-url", "", "NATS of the log to replay")
	fs.StringVar(&from, "from-data-dir", "./.cairn", "data directory of the running cairn up whose log to replay (instead of --nats-url)")
	fs.BoolVar(&fsync, "fsync", false, "fsync every etcd commit (default: one sync at the end)")
	if _, err := parse(fs, args, 0, 0, func() bool { return dataDir != "" }); err != nil {
		return done(err)
	}
	cfg := replay.Config{DataDir: dataDir, Fsync: fsync}
	if to != "" {
		p, err := travel.ParsePoint(to)
		if err != nil {
			return err
		}
		cfg.ToRev, cfg.ToTime = p.Rev, p.Time
	}
	if natsURL == "" {
		ep, err := endpoints.Read(endpoints.Path(from))
		if err != nil {
			return fmt.Errorf("no --nats-url and no running cairn up in %s: %w", from, err)
		}
		natsURL = ep.NATS
	}
	nc, err := nats.Connect(natsURL)
	if err != nil {
		return fmt.Errorf("nats %s: %w", natsURL, err)
	}
	defer nc.Close()
	if cfg.JS, err = jetstream.New(nc); err != nil {
		return fmt.Errorf("jetstream: %w", err)
	}
	rep, err := replay.Run(ctx, cfg)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "replayed %d events (%d revisions, %d padded) up to revision %d into %s in %.1fs: %.0f events/s\n",
		rep.Events, rep.Revisions, rep.Pads, rep.Head, dataDir, rep.Seconds, rep.EventsPerSecond)
	return err
}
