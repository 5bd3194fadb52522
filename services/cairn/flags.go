package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// errUsage marks a flag error the flag package has already reported.
var errUsage = errors.New("cairn: usage")

func isUsage(err error) bool { return errors.Is(err, errUsage) }

// defaultDataDir is the data directory of every command that takes one.
const defaultDataDir = "./.cairn"

// cmdFlags is the flag set of one subcommand: newFlagSet makes it for
// every command, also for those whose code lives elsewhere
// (projections/history/cli). A command that takes one of the flags cairn's
// commands share registers it with the method of that name, so each
// shared flag is spelt, defaulted and documented once:
//
//	dataDirFlag    --data-dir
//	clientFlags    --data-dir, --kubeconfig: the commands users run (kubectl's rules, see cluster.go)
//	serviceFlags   --data-dir, --kubeconfig, --nats-url, --log-level: a service next to a cairn up
//	logFlags       --nats-url and, for tools that read etcd, --etcd-endpoints
//	logLevelFlag   --log-level
//
// After parse, the methods of cluster.go find the apiserver and the log
// from them.
type cmdFlags struct {
	*flag.FlagSet
	dataDir, kubeconfig, logLevel string
	natsURL                       string
	etcd                          listFlag

	// kubeconfigEnv is whether KUBECONFIG applies: it does to the commands
	// users run, as to kubectl, not to the services, as kube's own daemons
	// (kubelet, scheduler) read only their --kubeconfig.
	kubeconfigEnv bool
	// kubeconfigFile is the kubeconfig's name in the data directory when
	// nothing else names one; defaultKubeconfig, when set, is the path
	// instead (the kubelet's, issued for its node).
	kubeconfigFile    string
	defaultKubeconfig string
}

// newFlagSet returns the flag set of subcommand name, which reports to
// stderr and returns errors instead of exiting; it has no flags yet.
func newFlagSet(name string, stderr io.Writer) *cmdFlags {
	fs := flag.NewFlagSet("cairn "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return &cmdFlags{FlagSet: fs}
}

// describe makes -h print "usage: cairn <synopsis>", about and the flags.
func (f *cmdFlags) describe(synopsis, about string) {
	f.Usage = func() {
		fmt.Fprintf(f.Output(), "usage: cairn %s\n\n%s\n\nflags:\n", synopsis, about)
		f.PrintDefaults()
	}
}

// dataDirFlag registers --data-dir, default ./.cairn, with usage.
func (f *cmdFlags) dataDirFlag(usage string) {
	f.StringVar(&f.dataDir, "data-dir", defaultDataDir, usage)
}

// logLevelFlag registers --log-level.
func (f *cmdFlags) logLevelFlag() {
	f.StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, warn or error")
}

// clientFlags registers the flags that locate the cluster for a command
// users run (timeline, audit, get, diff, events), with kubectl's rules.
func (f *cmdFlags) clientFlags() {
	f.kubeconfigEnv, f.kubeconfigFile = true, "kubeconfig"
	f.dataDirFlag("data directory of a running cairn up: its kubeconfig, and its endpoints.json for etcd and NATS " +
		"(used when set, or when neither --kubeconfig nor KUBECONFIG names a kubeconfig)")
	f.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig of the cluster; default: $KUBECONFIG (a list of files, "+
		"merged as kubectl merges them) unless --data-dir is set, else <data-dir>/kubeconfig")
}

// serviceFlags registers the connection flags of a service that runs as
// its own process next to a `cairn up` (controller-manager, scheduler,
// kubelet): by default it uses file, the kubeconfig that cairn up writes
// for it in the data directory, and the NATS of the data directory.
// kubeconfigUsage, when not empty, replaces the usage of --kubeconfig.
func (f *cmdFlags) serviceFlags(file, kubeconfigUsage string) {
	f.kubeconfigFile = file
	if kubeconfigUsage == "" {
		kubeconfigUsage = "kubeconfig to reach the apiserver (default <data-dir>/" + file + "; KUBECONFIG is not read, as by kube's own services)"
	}
	f.dataDirFlag("data directory of a running cairn up: the kubeconfig for this service and NATS are taken from there unless given below")
	f.StringVar(&f.kubeconfig, "kubeconfig", "", kubeconfigUsage)
	f.logFlags(false)
	f.logLevelFlag()
}

// logFlags registers --nats-url and, with etcd, --etcd-endpoints: the
// addresses of the log, which otherwise come from the endpoints file of the
// cluster (see endpoints in cluster.go).
func (f *cmdFlags) logFlags(etcd bool) {
	f.StringVar(&f.natsURL, "nats-url", "", "NATS URL of the log (default: from the endpoints.json of the cluster's data directory)")
	if etcd {
		f.Var(&f.etcd, "etcd-endpoints", "comma-separated etcd client URLs (default: from the endpoints.json of the cluster's data directory)")
	}
}

// logger is the logger --log-level asks for, writing to w.
func (f *cmdFlags) logger(w io.Writer) (*slog.Logger, error) { return newLogger(w, f.logLevel) }

// given reports whether flag name was set on the command line.
func (f *cmdFlags) given(name string) bool {
	set := false
	f.Visit(func(fl *flag.Flag) { set = set || fl.Name == name })
	return set
}

// parse parses args. -h is not an error; other flag errors and stray
// arguments are errUsage.
func (f *cmdFlags) parse(args []string) (help bool, err error) {
	if err := f.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return true, nil
		}
		return false, errUsage
	}
	if f.NArg() > 0 {
		f.Output().Write([]byte("unexpected arguments: " + strings.Join(f.Args(), " ") + "\n"))
		f.Usage()
		return false, errUsage
	}
	return false, nil
}

// listFlag is a comma-separated list flag.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(s string) error {
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			*l = append(*l, part)
		}
	}
	return nil
}
