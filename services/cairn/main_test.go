package main

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/services/apiserver"
)

// TestMain lets a test run this test binary as the cairn binary: with
// CAIRN_TEST_MAIN=1 it behaves as main.
func TestMain(m *testing.M) {
	if os.Getenv("CAIRN_TEST_MAIN") == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

func TestRun(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{name: "no command", args: nil, wantCode: 2, wantStderr: "usage: cairn <command>"},
		{name: "help", args: []string{"help"}, wantCode: 0, wantStdout: "usage: cairn <command>"},
		{name: "unknown", args: []string{"frobnicate"}, wantCode: 2, wantStderr: `unknown command "frobnicate"`},
		{name: "version", args: []string{"version"}, wantCode: 0, wantStdout: "cairn "},
		{name: "version stray arg", args: []string{"version", "x"}, wantCode: 2, wantStderr: "unexpected arguments: x"},
		{name: "up help", args: []string{"up", "-h"}, wantCode: 0, wantStderr: "-data-dir"},
		{name: "up bad flag", args: []string{"up", "--bogus"}, wantCode: 2, wantStderr: "flag provided but not defined"},
		{name: "up bad log level", args: []string{"up", "--data-dir", "DATA", "--log-level", "loud"}, wantCode: 1, wantStderr: `log level "loud"`},
		{name: "timeline help", args: []string{"timeline", "-h"}, wantCode: 0, wantStderr: "else $KUBECONFIG"},
		{name: "events verify help", args: []string{"events", "verify", "-h"}, wantCode: 0, wantStderr: "so KUBECONFIG=D/kubeconfig finds D/endpoints.json"},
		{name: "kubelet help", args: []string{"kubelet", "-h"}, wantCode: 0, wantStderr: "for user system:node:<node-name>, group system:nodes"},
		{name: "events verify with addresses needs no data dir", args: []string{"events", "verify", "--data-dir", "DATA", "--etcd-endpoints", "http://127.0.0.1:1", "--nats-url", "nats://127.0.0.1:1"},
			wantCode: 1, wantStderr: "cairn events: nats nats://127.0.0.1:1:"},
		{name: "events tail with --nats-url needs no data dir", args: []string{"events", "tail", "--data-dir", "DATA", "--nats-url", "nats://127.0.0.1:1"},
			wantCode: 1, wantStderr: "cairn events: nats nats://127.0.0.1:1:"},
		{name: "coredns help", args: []string{"coredns", "-h"}, wantCode: 0, wantStderr: "plugins: [bind cache errors"},
		{name: "coredns missing Corefile", args: []string{"coredns", "-conf", "DATA/none"}, wantCode: 1, wantStderr: "clusterdns: open"},
		{name: "up negative log backpressure", args: []string{"up", "--data-dir", "DATA", "--log-backpressure", "-1s"}, wantCode: 2,
			wantStderr: `invalid value "-1s" for flag -log-backpressure: -1s: want 0 (off) or more`},
		{name: "apiserver bad log backpressure", args: []string{"apiserver", "--log-backpressure", "soon"}, wantCode: 2,
			wantStderr: `invalid value "soon" for flag -log-backpressure`},
		{name: "up bad listen", args: []string{"up", "--data-dir", "DATA", "--listen", "6443"}, wantCode: 1, wantStderr: `listen address "6443"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			args := make([]string, len(tt.args))
			for i, a := range tt.args {
				args[i] = strings.ReplaceAll(a, "DATA", dir)
			}
			var stdout, stderr bytes.Buffer
			code := run(t.Context(), args, &stdout, &stderr)
			if code != tt.wantCode {
				t.Errorf("exit code = %d, want %d; stderr:\n%s", code, tt.wantCode, stderr.String())
			}
			if !strings.Contains(stdout.String(), tt.wantStdout) {
				t.Errorf("stdout = %q, want it to contain %q", stdout.String(), tt.wantStdout)
			}
			if !strings.Contains(stderr.String(), tt.wantStderr) {
				t.Errorf("stderr = %q, want it to contain %q", stderr.String(), tt.wantStderr)
			}
		})
	}
}

// TestLogBackpressureFlag: --log-backpressure defaults to the apiserver's
// default, takes a duration, and 0 turns the gate off (a negative
// apiserver.Config.LogBackpressure).
func TestLogBackpressureFlag(t *testing.T) {
	for _, c := range []struct {
		args []string
		want time.Duration
	}{
		{nil, apiserver.DefaultLogBackpressure},
		{[]string{"--log-backpressure", "300ms"}, 300 * time.Millisecond},
		{[]string{"--log-backpressure=0"}, -1},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		var d time.Duration
		logBackpressureFlag(fs, &d)
		if err := fs.Parse(c.args); err != nil {
			t.Fatalf("%v: %v", c.args, err)
		}
		if d != c.want {
			t.Errorf("%v: %v, want %v", c.args, d, c.want)
		}
	}
}

func TestListFlag(t *testing.T) {
	var l listFlag
	for _, s := range []string{"http://a:2379, http://b:2379", "", "http://c:2379"} {
		if err := l.Set(s); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := l.String(), "http://a:2379,http://b:2379,http://c:2379"; got != want {
		t.Errorf("list = %q, want %q", got, want)
	}
}

// TestUpStopsOnSignal runs `cairn up` as a real process, waits until it is
// up, sends SIGINT and expects a clean exit.
func TestUpStopsOnSignal(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, os.Args[0], "up", "--data-dir", dir, "--listen", "127.0.0.1:16443", "--node=false")
			cmd.Env = append(os.Environ(), "CAIRN_TEST_MAIN=1")
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			var lines []string
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				lines = append(lines, sc.Text())
				if strings.HasPrefix(sc.Text(), "cairn up:") {
					break
				}
			}
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			for sc.Scan() {
				lines = append(lines, sc.Text())
			}
			if err := cmd.Wait(); err != nil {
				t.Fatalf("cairn up exited with %v\nstdout:\n%s\nstderr:\n%s", err, strings.Join(lines, "\n"), stderr.String())
			}
			if len(lines) < 2 || !strings.HasPrefix(lines[0], "pki ready") || !strings.HasPrefix(lines[1], "kubeconfig written") {
				t.Errorf("stdout = %q", lines)
			}
			if _, err := os.Stat(filepath.Join(dir, "kubeconfig")); err != nil {
				t.Error(err)
			}
			checkUpOutput(t, dir, lines, stderr.String())
		})
	}
}

// readyLine is a line of cairn up's stdout before the last two: a
// component and, in parentheses, a detail.
var readyLine = regexp.MustCompile(`^[a-z][a-z -]* (ready|written)( \(.+\))?$`)

// checkUpOutput checks what a `cairn up --node=false` on dir that ran and
// stopped cleanly printed: on stdout one plain line per component (etcd,
// NATS, the log, the apiserver, the history, the controllers, the
// scheduler), then the summary and the export line, and no structured
// record; on stderr nothing at info; in dir/cairn.log the records.
func checkUpOutput(t *testing.T, dir string, stdout []string, stderr string) {
	t.Helper()
	sum := slices.IndexFunc(stdout, func(l string) bool { return strings.HasPrefix(l, "cairn up: ") })
	if sum < 0 {
		t.Fatalf("no summary line on stdout: %q", stdout)
	}
	var components []string
	for i, l := range stdout[:sum] {
		if !readyLine.MatchString(l) || strings.Contains(l, "level=") || strings.Contains(l, "msg=") {
			t.Errorf("stdout line %d is not a ready line: %q", i, l)
			continue
		}
		components = append(components, strings.Fields(l)[0])
	}
	if want := "log in " + filepath.Join(dir, "cairn.log"); !strings.HasSuffix(stdout[sum], want) {
		t.Errorf("summary line %q does not end with %q", stdout[sum], want)
	}
	if want := []string{"export KUBECONFIG=" + filepath.Join(dir, "kubeconfig")}; !slices.Equal(stdout[sum+1:], want) {
		t.Errorf("stdout after the summary %q, want %q", stdout[sum+1:], want)
	}
	want := []string{"pki", "kubeconfig", "etcd", "nats", "log", "apiserver", "history", "controller-manager", "scheduler", "cluster-dns"}
	if !slices.Equal(components, want) {
		t.Errorf("ready lines for %q, want %q", components, want)
	}
	if strings.Contains(stderr, "level=INFO") {
		t.Errorf("info records on stderr:\n%s", stderr)
	}
	b, err := os.ReadFile(filepath.Join(dir, "cairn.log"))
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range []string{`msg="up: starting"`, `msg="all services ready"`, `msg="shard: holds 32 of 32 partitions"`, `msg=stopped service="control plane"`} {
		if !strings.Contains(string(b), rec) {
			t.Errorf("cairn.log lacks %s:\n%s", rec, b)
		}
	}
	if n := strings.Count(string(b), "acquired partition"); n > 0 {
		t.Errorf("cairn.log has %d lines per acquired partition, want one summary", n)
	}
}
