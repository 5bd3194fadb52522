package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/events/publish"
	"github.com/cairn-dev/cairn/schemas"
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

func runEventsTail(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var (
		kind     string
		opts     events.TailOptions
		from     int64
		noFollow bool
		asJSON   bool
	)
	fs := newFlagSet("events tail", stderr)
	fs.describe("events tail [flags]", "Print the log's events, one line each (or their JSON envelopes), and follow it.\n\n"+findsLog)
	fs.clientFlags()
	fs.logFlags(false)
	fs.StringVar(&kind, "kind", "", "only this kind (Pod, deployments, rs, ...)")
	fs.StringVar(&opts.Namespace, "namespace", "", "only this namespace")
	fs.StringVar(&opts.Namespace, "n", "", "short for --namespace")
	fs.StringVar(&opts.Name, "name", "", "only objects of this name")
	fs.Int64Var(&from, "from-revision", 0, "start at this revision (default: the oldest event kept)")
	fs.BoolVar(&noFollow, "no-follow", false, "stop at the end of the log instead of waiting for new events")
	fs.BoolVar(&asJSON, "json", false, "print each event's full envelope as JSON")
	if help, err := fs.parse(args); help || err != nil {
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
	ep, err := fs.endpoints()
	if err != nil {
		return err
	}
	nc, js, err := connectNATS(ep.NATS, "cairn-events")
	if err != nil {
		return err
	}
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
	fs := newFlagSet("events verify", stderr)
	fs.describe("events verify [flags]", "Check the log against etcd: one event per committed change, in order, none missing; exit 1 if not.\n\n"+findsLog)
	fs.clientFlags()
	fs.logFlags(true)
	if help, err := fs.parse(args); help || err != nil {
		return err
	}
	cli, nc, js, err := fs.connectLog()
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
