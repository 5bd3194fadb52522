package cli_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/projections/history/cli"
	"github.com/cairn-dev/cairn/projections/history/historytest"
)

// TestCommands runs each query command against a store file brought up to
// date from a synthetic log.
func TestCommands(t *testing.T) {
	js := historytest.StartLog(t)
	natsURL := js.Conn().ConnectedUrl()
	g := historytest.NewGen()
	var evs []*events.Event
	for i := range 4 {
		evs = append(evs, g.PodLife("default", i)...)
	}
	if err := historytest.Publish(t.Context(), js, evs); err != nil {
		t.Fatal(err)
	}
	db := []string{"--db", filepath.Join(t.TempDir(), "h.db")}
	cases := []struct {
		name string
		cmd  func(args []string, out io.Writer) error
		args []string
		want []string
	}{
		{"timeline", cmdOf(cli.Timeline), append([]string{"pod/pod-1", "--nats-url", natsURL}, db...),
			[]string{"Pod default/pod-1", "created", "scheduled to node-1", "running", "deleted", "system:kube-scheduler"}},
		{"timeline json", cmdOf(cli.Timeline), append([]string{"pods/pod-2", "-o", "json"}, db...), []string{`"class":"schedule"`}},
		{"audit by user", cmdOf(cli.Audit), append([]string{"--user", "bob"}, db...), []string{"bob", "delete", "Pod default/pod-1"}},
		{"get at", cmdOf(cli.Get), append([]string{"pods", "--at", "7"}, db...), []string{"pod-1"}},
		{"get one at", cmdOf(cli.Get), append([]string{"pods", "pod-1", "-n", "default", "--at", "8"}, db...), []string{`"phase": "Running"`}},
		{"diff", cmdOf(cli.Diff), append([]string{"pods/pod-1", "--from", "6", "--to", "8"}, db...), []string{`spec.nodeName: +"node-1"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			if err := tc.cmd(tc.args, &out); err != nil {
				t.Fatalf("%v\n%s", err, out.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
		})
	}
	var stderr bytes.Buffer
	if err := cli.Timeline(t.Context(), envOf("timeline", &stderr), []string{"--bogus"}, io.Discard); !errors.Is(err, cli.ErrUsage) {
		t.Errorf("bad flag: %v, want ErrUsage", err)
	}
	if err := cli.Timeline(t.Context(), envOf("timeline", io.Discard), append([]string{"pod/nope"}, db...), io.Discard); err == nil ||
		strings.Contains(err.Error(), "\n") {
		t.Errorf("unknown object: %v, want a one-line error", err)
	}
}

func cmdOf(f func(ctx context.Context, env cli.Env, args []string, stdout io.Writer) error) func([]string, io.Writer) error {
	return func(args []string, out io.Writer) error {
		return f(context.Background(), envOf("test", io.Discard), args, out)
	}
}

// envOf is the Env of a command that is only given --db: a bare flag set
// and no cluster.
func envOf(name string, stderr io.Writer) cli.Env {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return cli.Env{Flags: fs}
}
