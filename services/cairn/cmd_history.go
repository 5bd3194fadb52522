package main

import (
	"context"
	"errors"
	"io"
	"strings"

	historycli "github.com/cairn-dev/cairn/projections/history/cli"
)

// The commands of package projections/history/cli. The query commands get
// the flags that locate the cluster (clientFlags), resolved as every cairn
// command resolves them; replay takes none of the shared flags (its
// --data-dir is the directory it builds).

func runTimeline(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return runHistoryQuery(ctx, "timeline <kind>/<name> [-n ns] [--uid U] [-o json] [--follow] [flags]", historycli.Timeline, args, stdout, stderr)
}

func runAudit(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return runHistoryQuery(ctx, "audit [--user U] [--verb V] [--kind K] [-n N] [--since D|T] [--until T] [-o json] [flags]", historycli.Audit, args, stdout, stderr)
}

func runGet(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return runHistoryQuery(ctx, "get <kind> [name] --at <revision|RFC3339> [-n ns] [-o json] [flags]", historycli.Get, args, stdout, stderr)
}

func runDiff(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return runHistoryQuery(ctx, "diff <kind>/<name> --from T1 [--to T2] [-n ns] [-o json] [flags]", historycli.Diff, args, stdout, stderr)
}

func runReplay(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return runHistory(ctx, newFlagSet("replay", stderr), historycli.Replay, args, stdout)
}

// historyCommand is a command of package projections/history/cli.
type historyCommand func(ctx context.Context, env historycli.Env, args []string, stdout io.Writer) error

// runHistoryQuery runs the query command f, whose synopsis (for -h) is
// usage, with the shared flags that locate the cluster.
func runHistoryQuery(ctx context.Context, usage string, f historyCommand, args []string, stdout, stderr io.Writer) error {
	name, _, _ := strings.Cut(usage, " ")
	fs := newFlagSet(name, stderr)
	fs.describe(usage, findsCluster)
	fs.clientFlags()
	return runHistory(ctx, fs, f, args, stdout)
}

// runHistory runs f on fs.
func runHistory(ctx context.Context, fs *cmdFlags, f historyCommand, args []string, stdout io.Writer) error {
	err := f(ctx, historycli.Env{Flags: fs.FlagSet, RESTConfig: fs.restConfig}, args, stdout)
	if errors.Is(err, historycli.ErrUsage) {
		return errUsage
	}
	return err
}
