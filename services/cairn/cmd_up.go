package main

import (
	"context"
	"io"

	"github.com/cairn-dev/cairn/services/cairn/up"
)

func runUp(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var (
		cfg    up.Config
		etcd   listFlag
		hosts  listFlag
		svcNet serviceNetFlags
		sa     serviceAccountFlags
		dns    kubeletDNSFlags
		join   upJoinFlags
		apf    apfFlags
	)
	fs := newFlagSet("up", stderr)
	fs.dataDirFlag("directory for all state (etcd, NATS, PKI, kubeconfig)")
	fs.Var(&etcd, "etcd-endpoints", "comma-separated client URLs of an external etcd; empty runs an embedded etcd")
	fs.StringVar(&cfg.NATSURL, "nats-url", "", "URL of an external NATS server; empty runs an embedded one")
	fs.StringVar(&cfg.Listen, "listen", "127.0.0.1:6443", "address the apiserver listens on")
	fs.Var(&hosts, "tls-san", "comma-separated extra names or addresses for the apiserver certificate")
	fs.StringVar(&fs.logLevel, "log-level", "info", "log level of <data-dir>/cairn.log: debug, info, warn or error (stderr gets warn and above, or everything at debug)")
	fs.BoolVar(&cfg.Node, "node", true, "run a real node in this process (containerd, CNI, kubelet; needs root)")
	fs.StringVar(&cfg.NodeName, "node-name", "", "name of that node (default: the host name)")
	fs.BoolVar(&cfg.RebuildHistory, "rebuild-history", false, "rebuild the history store (timelines, audit) from the whole log")
	requestTimeoutFlag(fs.FlagSet, &cfg.RequestTimeout)
	logBackpressureFlag(fs.FlagSet, &cfg.LogBackpressure)
	profilingFlag(fs.FlagSet, &cfg.DisableProfiling)
	apf.register(fs.FlagSet)
	svcNet.register(fs.FlagSet)
	sa.register(fs.FlagSet)
	dns.register(fs.FlagSet)
	fs.StringVar(&cfg.DNS.Forward, "dns-forward", "", "the cluster DNS's upstream for names outside the cluster domain, as kubeadm's "+
		"\"forward . /etc/resolv.conf\" (a resolv.conf or addresses); empty forwards nothing (no query leaves the cluster)")
	fs.BoolVar(&cfg.DNS.Disabled, "disable-cluster-dns", false, "do not deploy the cluster DNS (CoreDNS, Service kube-dns)")
	join.register(fs.FlagSet, &cfg)
	if help, err := fs.parse(args); help || err != nil {
		return err
	}
	cfg.DataDir = fs.dataDir
	cfg.PriorityAndFairness = apf.enable
	limit, err := apf.limit()
	if err != nil {
		return err
	}
	cfg.MaxRequestsInFlight = limit
	cfg.ServiceClusterIPRange, cfg.ServiceNodePortRange, cfg.AdvertiseAddress = svcNet.clusterIPRange, svcNet.nodePortRange, svcNet.advertise
	cfg.ServiceAccountIssuer, cfg.APIAudiences, cfg.MaxTokenExpiration = sa.values()
	cfg.DNS.ClusterDomain, cfg.DNS.ResolvConf = dns.clusterDomain, dns.resolvConf
	if fs.given("cluster-dns") {
		cfg.DNS.ClusterDNS = dns.servers()
		if cfg.DNS.ClusterDNS == nil {
			cfg.DNS.ClusterDNS = []string{}
		}
	}
	cfg.EtcdEndpoints = etcd
	cfg.Hosts = hosts

	level, err := parseLevel(fs.logLevel)
	if err != nil {
		return err
	}
	// Before the log file: a join refused writes nothing.
	if err := join.fetch(ctx, &cfg); err != nil {
		return err
	}
	log, closeLog, err := up.OpenLog(cfg.DataDir, level, stderr)
	if err != nil {
		return err
	}
	defer closeLog()
	return up.Run(ctx, klogTo(log), stdout, cfg)
}
