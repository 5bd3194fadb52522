package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/events/publish"
	"github.com/cairn-dev/cairn/schemas"
	"github.com/cairn-dev/cairn/services/embedded/endpoints"
)

// errVerifyFailed makes `events verify` exit 1 after printing its report.
var errVerifyFailed = errors.New("the log does not match etcd")

func runEvents(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: cairn events tail|verify [flags]")
		return errUsage
	}
	switch args[0] {
	case "tail":
		return runEventsTail(ctx, args[1:], stdout, stderr)
	case "verify":
		return runEventsVerify(ctx, args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "cairn events: unknown command %q (want tail or verify)\n", args[0])
	return errUsage
}

// logFlags are the flags that locate etcd and NATS.
type logFlags struct {
	dataDir string
	etcd    listFlag
	natsURL string
}

func addLogFlags(fs *flag.FlagSet, l *logFlags) {
	fs.StringVar(&l.dataDir, "data-dir", "./.cairn", "data directory of a running `cairn up` (its endpoints file locates etcd and NATS)")
	fs.Var(&l.etcd, "etcd-endpoints", "etcd client URLs (instead of --data-dir)")
	fs.StringVar(&l.natsURL, "nats-url", "", "NATS URL (instead of --data-dir)")
}

// connect opens etcd and JetStream clients.
func (l *logFlags) connect() (*clientv3.Client, *nats.Conn, jetstream.JetStream, error) {
	etcd, natsURL := []string(l.etcd), l.natsURL
	if len(etcd) == 0 || natsURL == "" {
		ep, err := endpoints.Read(endpoints.Path(l.dataDir))
		if err != nil {
			return nil, nil, nil, fmt.Errorf("no --etcd-endpoints/--nats-url and no running cairn up in %s: %w", l.dataDir, err)
		}
		if len(etcd) == 0 {
			etcd = ep.Etcd
		}
		if natsURL == "" {
			natsURL = ep.NATS
		}
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: etcd, DialTimeout: 5 * time.Second, Logger: zap.NewNop(), MaxCallRecvMsgSize: 1 << 30})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("etcd: %w", err)
	}
	nc, err := nats.Connect(natsURL)
	if err != nil {
		cli.Close()
		return nil, nil, nil, fmt.Errorf("nats %s: %w", natsURL, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		cli.Close()
		nc.Close()
		return nil, nil, nil, fmt.Errorf("jetstream: %w", err)
	}
	return cli, nc, js, nil
}

func runEventsTail(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var (
		lf       logFlags
		kind     string
		opts     events.TailOptions
		from     int64
		noFollow bool
		asJSON   bool
	)
	fs := newFlagSet("events tail", stderr)
	addLogFlags(fs, &lf)
	fs.StringVar(&kind, "kind", "", "only this kind (Pod, deployments, rs, ...)")
	fs.StringVar(&opts.Namespace, "namespace", "", "only this namespace")
	fs.StringVar(&opts.Namespace, "n", "", "short for --namespace")
	fs.StringVar(&opts.Name, "name", "", "only objects of this name")
	fs.Int64Var(&from, "from-revision", 0, "start at this revision (default: the oldest event kept)")
	fs.BoolVar(&noFollow, "no-follow", false, "stop at the end of the log instead of waiting for new events")
	fs.BoolVar(&asJSON, "json", false, "print each event's full envelope as JSON")
	if help, err := parse(fs, args); help || err != nil {
		return err
	}
	if kind != "" {
		res, err := resolveKind(kind)
		if err != nil {
			return err
		}
		opts.Group, opts.Resource = res.GroupVersion.Group, res.Plural
		if opts.Group == "" {
			opts.Group = "core"
		}
	}
	opts.FromRevision = events.Revision(from)
	opts.Follow = !noFollow
	cli, nc, js, err := lf.connect()
	if err != nil {
		return err
	}
	defer cli.Close()
	defer nc.Close()
	enc := json.NewEncoder(stdout)
	return events.Tail(ctx, js, opts, func(e *events.Event) error {
		if asJSON {
			return enc.Encode(e)
		}
		_, err := fmt.Fprintln(stdout, events.FormatLine(e))
		return err
	})
}

func runEventsVerify(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var lf logFlags
	fs := newFlagSet("events verify", stderr)
	addLogFlags(fs, &lf)
	if help, err := parse(fs, args); help || err != nil {
		return err
	}
	cli, nc, js, err := lf.connect()
	if err != nil {
		return err
	}
	defer cli.Close()
	defer nc.Close()
	rep, err := publish.Verify(ctx, cli, js)
	if err != nil {
		return err
	}
	if err := rep.Write(stdout); err != nil {
		return err
	}
	if !rep.OK() {
		return errVerifyFailed
	}
	return nil
}

// resolveKind finds a served resource by kind, plural, singular or short
// name, case-insensitively.
func resolveKind(s string) (*schemas.Resource, error) {
	want := strings.ToLower(s)
	for _, r := range schemas.NewRegistry().All() {
		if strings.ToLower(r.Kind) == want || r.Plural == want || r.Singular == want {
			return r, nil
		}
		for _, sn := range r.ShortNames {
			if sn == want {
				return r, nil
			}
		}
	}
	return nil, fmt.Errorf("unknown kind %q", s)
}
