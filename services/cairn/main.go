package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"google.golang.org/grpc/grpclog"
	"k8s.io/klog/v2"
)

// command is one subcommand: it parses its own flags from args and runs.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

func commands() []command {
	return []command{
		{"up", "run a whole cluster in this process", runUp},
		{"apiserver", "run the apiserver (with the log publisher) on an external etcd and NATS", runAPIServer},
		{"controller-manager", "run the controllers (one replica of many; keys are split between replicas)", runControllerManager},
		{"scheduler", "run a scheduler replica (replicas bind optimistically; the apiserver refuses overcommits)", runScheduler},
		{"kubelet", "run a node: real pods on containerd (--runtime cri) or many hollow nodes (--runtime hollow)", runKubelet},
		{"agent", "the same as kubelet (k3s' word): cairn agent --join https://ADDR:PORT --join-token TOKEN", runKubelet},
		{"token", "create a join token for nodes (cairn token create [--ttl D] [--groups G])", runToken},
		{"proxy", "run a node's service proxy (nftables in the node's network namespace, from Services and EndpointSlices)", runProxy},
		{"csi-hostpath", "run the CSI driver hostpath.csi.cairn.dev (volumes are directories of the node) on a unix socket", runCSIHostpath},
		{"coredns", "run CoreDNS, the cluster DNS (the image cairn.local/coredns runs it)", runCoreDNS},
		{"timeline", "the life of an object and its causal chain, from the log", runTimeline},
		{"audit", "who changed what, and when", runAudit},
		{"get", "objects as they were at a revision or time (--at)", runGet},
		{"diff", "an object's changes between two points of the log", runDiff},
		{"replay", "rebuild a data directory (etcd and the log) from the log alone", runReplay},
		{"events", "follow the log (tail) or check it against etcd (verify)", runEvents},
		{"cluster", "the servers: etcd members, the log's streams and replicas, the publisher, partition owners (cluster status)", runCluster},
		{"version", "print the version", runVersion},
	}
}

func main() {
	// gRPC (containerd's CRI client, etcd's client) prints its connection
	// retries to stderr as warnings, e.g. while the node's containerd is
	// starting; cairn reports what fails itself. Only gRPC's errors stay.
	grpclog.SetLoggerV2(grpclog.NewLoggerV2(io.Discard, io.Discard, os.Stderr))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// After the first signal the default action is restored, so a second
	// one kills a process that is slow to stop.
	context.AfterFunc(ctx, stop)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run dispatches to the subcommand in args[0] and returns the exit code:
// 0 on success, 1 when the command failed, 2 on a usage error.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	name := args[0]
	if name == "help" || name == "-h" || name == "-help" || name == "--help" {
		usage(stdout)
		return 0
	}
	for _, c := range commands() {
		if c.name != name {
			continue
		}
		err := c.run(ctx, args[1:], stdout, stderr)
		switch {
		case err == nil:
			return 0
		case isUsage(err):
			return 2
		default:
			fmt.Fprintf(stderr, "cairn %s: %v\n", name, err)
			return 1
		}
	}
	fmt.Fprintf(stderr, "cairn: unknown command %q\n\n", name)
	usage(stderr)
	return 2
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: cairn <command> [flags]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "commands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-18s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Run 'cairn <command> -h' for the flags of a command.")
}

// newLogger returns a text logger to w at level, one of debug, info, warn
// and error.
func newLogger(w io.Writer, level string) (*slog.Logger, error) {
	l, err := parseLevel(level)
	if err != nil {
		return nil, err
	}
	return klogTo(slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l}))), nil
}

// klogTo sends what the Kubernetes libraries log through klog (API
// Priority and Fairness's config controller, informers) to log, so it
// lands in the command's log at its level instead of as klog's own lines
// on stderr. It returns log.
func klogTo(log *slog.Logger) *slog.Logger {
	klog.SetSlogLogger(log)
	return log
}

// parseLevel parses a --log-level flag: debug, info, warn or error.
func parseLevel(level string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return 0, fmt.Errorf("log level %q: %w", level, err)
	}
	return l, nil
}
