package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/cairn-dev/cairn/services/embedded/endpoints"
)

// How a command finds its cluster from the shared flags (cmdFlags), in the
// order kubectl finds its kubeconfig, with the data directory in place of
// ~/.kube/config:
//
//  1. --kubeconfig F: F, which must exist.
//  2. --data-dir D given on the command line: D/kubeconfig (a flag beats
//     the environment).
//  3. KUBECONFIG (commands users run only): a colon-separated list of
//     files, merged by client-go's rules as kubectl merges them (the first
//     file to set a value wins; missing files are skipped).
//  4. ./.cairn/kubeconfig (or the service's kubeconfig in the data dir).
//
// etcd and NATS, for the commands that need them, are --etcd-endpoints and
// --nats-url when given, else the endpoints.json that `cairn up` keeps in
// its data directory while it runs: that of --data-dir when given, else the
// one in the directory of the kubeconfig file that defines the current
// context's cluster when 1 or 3 named the kubeconfig (cairn up writes its
// kubeconfig into its data directory, so KUBECONFIG=D/kubeconfig finds
// D/endpoints.json), else that of ./.cairn.

// findsCluster and findsLog say the above in a command's -h.
const (
	findsCluster = "The cluster: --kubeconfig; else --data-dir D when given (D/kubeconfig); else $KUBECONFIG,\n" +
		"a colon-separated list of files merged as kubectl merges them; else ./.cairn/kubeconfig."
	findsLog = findsCluster + "\n\n" +
		"etcd and NATS: --etcd-endpoints and --nats-url; else the endpoints.json that a running cairn up keeps\n" +
		"in its data directory: that of --data-dir when given; else, when --kubeconfig or KUBECONFIG names the\n" +
		"kubeconfig, the directory of the kubeconfig file that defines the current context's cluster (cairn up\n" +
		"writes its kubeconfig there, so KUBECONFIG=D/kubeconfig finds D/endpoints.json); else ./.cairn."
)

// kubeconfigSource is the kubeconfig a command uses, as loading rules.
type kubeconfigSource struct {
	rules *clientcmd.ClientConfigLoadingRules
	// named is whether --kubeconfig or KUBECONFIG chose it, rather than
	// the data directory.
	named bool
	// what describes it in errors.
	what string
}

func (f *cmdFlags) kubeconfigSource() kubeconfigSource {
	if f.kubeconfig != "" {
		return kubeconfigSource{rules: &clientcmd.ClientConfigLoadingRules{ExplicitPath: f.kubeconfig}, named: true, what: "--kubeconfig " + f.kubeconfig}
	}
	if env := os.Getenv(clientcmd.RecommendedConfigPathEnvVar); f.kubeconfigEnv && env != "" && !f.given("data-dir") {
		return kubeconfigSource{rules: &clientcmd.ClientConfigLoadingRules{Precedence: filepath.SplitList(env)}, named: true, what: "KUBECONFIG=" + env}
	}
	path := f.defaultKubeconfig
	if path == "" {
		path = filepath.Join(f.dataDir, f.kubeconfigFile)
	}
	return kubeconfigSource{rules: &clientcmd.ClientConfigLoadingRules{ExplicitPath: path}, what: "kubeconfig " + path}
}

// restConfig is the config of the apiserver the flags name. Errors are
// one line and say where the kubeconfig was looked for.
func (f *cmdFlags) restConfig() (*rest.Config, error) {
	src := f.kubeconfigSource()
	if err := src.check(f); err != nil {
		return nil, err
	}
	rc, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(src.rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", src.what, oneLine(err))
	}
	return rc, nil
}

// check fails, with a hint, when no file of the source exists.
func (src kubeconfigSource) check(f *cmdFlags) error {
	if p := src.rules.ExplicitPath; p != "" {
		_, err := os.Stat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist) && !src.named && !f.given("data-dir") && f.kubeconfigEnv:
			return fmt.Errorf("no kubeconfig: %s does not exist and neither --kubeconfig nor KUBECONFIG is set "+
				"(run where the .cairn of a cairn up is, or set KUBECONFIG, or pass --data-dir or --kubeconfig)", p)
		case err != nil:
			return fmt.Errorf("%s: %w", src.what, err)
		}
		return nil
	}
	for _, p := range src.rules.Precedence {
		if _, err := os.Stat(p); err == nil {
			return nil
		}
	}
	return fmt.Errorf("no kubeconfig: none of the files in %s exists", src.what)
}

// endpoints returns the addresses of the log's etcd and NATS: those the
// flags give, completed from the cluster's endpoints file (see above).
func (f *cmdFlags) endpoints() (endpoints.Set, error) {
	set := endpoints.Set{Etcd: f.etcd, NATS: f.natsURL}
	if f.natsURL != "" && (len(f.etcd) > 0 || f.Lookup("etcd-endpoints") == nil) {
		return set, nil
	}
	path, where, err := f.endpointsFile()
	if err != nil {
		return set, err
	}
	ep, err := endpoints.Read(path)
	if err != nil {
		flags := "--nats-url"
		if f.Lookup("etcd-endpoints") != nil {
			flags = "--etcd-endpoints and --nats-url"
		}
		return set, fmt.Errorf("no running cairn up found %s (%w); pass --data-dir of a running cairn up, or %s", where, err, flags)
	}
	if len(set.Etcd) == 0 {
		set.Etcd = ep.Etcd
	}
	if set.NATS == "" {
		set.NATS = ep.NATS
	}
	set.APIServer = ep.APIServer
	return set, nil
}

// endpointsFile is the endpoints file the flags point at, and where that
// is, for errors.
func (f *cmdFlags) endpointsFile() (path, where string, err error) {
	src := f.kubeconfigSource()
	if f.given("data-dir") || !src.named {
		return endpoints.Path(f.dataDir), "in the data directory " + f.dataDir, nil
	}
	if err := src.check(f); err != nil {
		return "", "", err
	}
	cfg, err := src.rules.Load()
	if err != nil {
		return "", "", fmt.Errorf("%s: %w", src.what, oneLine(err))
	}
	cur := cfg.Contexts[cfg.CurrentContext]
	if cur == nil {
		return "", "", fmt.Errorf("%s: no current context", src.what)
	}
	cl := cfg.Clusters[cur.Cluster]
	if cl == nil || cl.LocationOfOrigin == "" {
		return "", "", fmt.Errorf("%s: context %q has no cluster", src.what, cfg.CurrentContext)
	}
	dir := filepath.Dir(cl.LocationOfOrigin)
	return endpoints.Path(dir), "next to the kubeconfig " + cl.LocationOfOrigin, nil
}

// oneLine keeps err but prints it on one line: client-go aggregates
// validation errors on several.
func oneLine(err error) error {
	if strings.Contains(err.Error(), "\n") {
		return oneLineError{err}
	}
	return err
}

type oneLineError struct{ error }

func (e oneLineError) Error() string { return strings.Join(strings.Fields(e.error.Error()), " ") }

func (e oneLineError) Unwrap() error { return e.error }
