package main

import (
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/services/apiserver"
	"github.com/cairn-dev/cairn/services/apiserver/servicealloc"
	"github.com/cairn-dev/cairn/services/pki/satoken"
	"github.com/cairn-dev/cairn/services/proxy"
)

// serviceNetFlags are the apiserver's Service network flags, shared by
// cairn apiserver and cairn up (kube-apiserver's names).
type serviceNetFlags struct {
	clusterIPRange, nodePortRange, advertise string
}

func (f *serviceNetFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.clusterIPRange, "service-cluster-ip-range", servicealloc.DefaultClusterIPRange,
		"IPv4 CIDR Services get their cluster IPs from; its first address is the kubernetes Service's (the same on every apiserver)")
	fs.StringVar(&f.nodePortRange, "service-node-port-range", servicealloc.DefaultNodePortRange,
		"port range NodePort Services get their node ports from (the same on every apiserver)")
	fs.StringVar(&f.advertise, "advertise-address", proxy.APIServerAddress,
		"IP address the kubernetes Service's endpoints list for this apiserver; the default is the address at which "+
			"every cairn node's proxy relays to the apiserver from inside the node's network namespace, so that pods reach it "+
			"at 10.96.0.1:443 (empty: the IP of --listen)")
}

// serviceAccountFlags are the apiserver's service-account token flags,
// shared by cairn apiserver and cairn up (kube-apiserver's names).
type serviceAccountFlags struct {
	issuer, audiences string
	maxExpiration     time.Duration
}

func (f *serviceAccountFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.issuer, "service-account-issuer", satoken.DefaultIssuer,
		"iss of the service-account tokens this apiserver issues (the same on every apiserver)")
	fs.StringVar(&f.audiences, "api-audiences", "",
		"comma-separated audiences a service-account token must name to be accepted, and which tokens get when the request names none (empty: the issuer)")
	fs.DurationVar(&f.maxExpiration, "service-account-max-token-expiration", 0,
		"the longest lifetime a requested service-account token gets (0: no cap but the API's 2^32 s)")
}

// values are the issuer, the audiences (nil: the issuer) and the cap, as
// controlplane.Config and up.Config take them.
func (f *serviceAccountFlags) values() (issuer string, audiences []string, maxExpiration time.Duration) {
	for _, a := range strings.Split(f.audiences, ",") {
		if a = strings.TrimSpace(a); a != "" {
			audiences = append(audiences, a)
		}
	}
	return f.issuer, audiences, f.maxExpiration
}

// profilingFlag is kube-apiserver's --profiling, shared by cairn
// apiserver and cairn up: it sets disable to its negation.
func profilingFlag(fs *flag.FlagSet, disable *bool) {
	fs.BoolFunc("profiling", "serve Go's profiles of the process at /debug/pprof/ to whoever may get it (default true)", func(v string) error {
		on, err := strconv.ParseBool(v)
		*disable = !on
		return err
	})
}

// apfFlags are kube-apiserver's API Priority and Fairness flags, shared
// by cairn apiserver and cairn up: --enable-priority-and-fairness, and
// the server's concurrency limit as the sum of --max-requests-inflight
// and --max-mutating-requests-inflight (APF shares the sum out among the
// priority levels, as kube does).
type apfFlags struct {
	enable             bool
	inflight, mutating int
}

func (a *apfFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&a.enable, "enable-priority-and-fairness", true, "API Priority and Fairness: classify every request by the FlowSchemas into a "+
		"priority level, queue it fairly there and answer 429 with Retry-After beyond its share; ensures kube's mandatory and suggested "+
		"FlowSchemas and PriorityLevelConfigurations (kube's default, true; =false serves the API types without the filter)")
	fs.IntVar(&a.inflight, "max-requests-inflight", 400, "with --enable-priority-and-fairness: the non-mutating share of the server's concurrency limit")
	fs.IntVar(&a.mutating, "max-mutating-requests-inflight", 200, "with --enable-priority-and-fairness: the mutating share of the server's concurrency limit")
}

// limit is the server's concurrency limit, or an error for a limit APF
// cannot share out.
func (a *apfFlags) limit() (int, error) {
	if a.inflight < 0 || a.mutating < 0 || a.inflight+a.mutating == 0 {
		return 0, fmt.Errorf("--max-requests-inflight %d and --max-mutating-requests-inflight %d: want at least one above 0 and neither below 0", a.inflight, a.mutating)
	}
	return a.inflight + a.mutating, nil
}

// logBackpressureFlag sets d from --log-backpressure, shared by cairn
// apiserver and cairn up; 0 on the command line turns it off (d < 0).
func logBackpressureFlag(fs *flag.FlagSet, d *time.Duration) {
	*d = apiserver.DefaultLogBackpressure
	fs.Func("log-backpressure", fmt.Sprintf("hold writes (but Leases' and Nodes') while the oldest write of this apiserver that is not yet "+
		"on the log is older than this, so that the log stays this close behind etcd under load; 0 turns it off (default %s)",
		apiserver.DefaultLogBackpressure), func(v string) error {
		x, err := time.ParseDuration(v)
		switch {
		case err != nil:
			return err
		case x < 0:
			return fmt.Errorf("%s: want 0 (off) or more", v)
		case x == 0:
			x = -1
		}
		*d = x
		return nil
	})
}

// requestTimeoutFlag is kube-apiserver's --request-timeout, shared by
// cairn apiserver and cairn up.
func requestTimeoutFlag(fs *flag.FlagSet, d *time.Duration) {
	fs.DurationVar(d, "request-timeout", apiserver.DefaultRequestTimeout,
		"the longest a request that is not long-running (watch, proxy, log, exec, attach, port-forward) may take before it is "+
			"answered 504 Timeout; a request's timeout query parameter may ask for less")
}
