package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/cairn-dev/cairn/services/cairn/up"
	"github.com/cairn-dev/cairn/services/controllers/manager"
	"github.com/cairn-dev/cairn/services/controllers/nodeipam"
)

// runControllerManager runs one controller-manager replica as its own
// process; any number run active-active, splitting the keys.
func runControllerManager(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var (
		dataDir, kubeconfigPath, natsURL, identity, logLevel, clusterCIDR string
		workers                                                           int
	)
	fs := newFlagSet("controller-manager", stderr)
	fs.StringVar(&dataDir, "data-dir", "./.cairn", "data directory of a running `cairn up`: its controller-manager kubeconfig and NATS endpoint are used unless given below")
	fs.StringVar(&kubeconfigPath, "kubeconfig", "", "kubeconfig to reach the apiserver (default <data-dir>/"+up.ControllerManagerKubeconfig+")")
	fs.StringVar(&natsURL, "nats-url", "", "NATS URL of the log (default from <data-dir>/"+up.EndpointsFile+")")
	fs.StringVar(&identity, "identity", "", "this replica's name among the replicas (default hostname-pid)")
	fs.IntVar(&workers, "workers", 4, "concurrent reconciles per controller")
	fs.StringVar(&clusterCIDR, "cluster-cidr", nodeipam.DefaultClusterCIDR, "IPv4 range split into /24 pod CIDRs, one per node")
	fs.StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn or error")
	if help, err := parse(fs, args); help || err != nil {
		return err
	}
	log, err := newLogger(stderr, logLevel)
	if err != nil {
		return err
	}
	if kubeconfigPath == "" {
		kubeconfigPath = filepath.Join(dataDir, up.ControllerManagerKubeconfig)
	}
	if natsURL == "" {
		ep, err := up.ReadEndpoints(filepath.Join(dataDir, up.EndpointsFile))
		if err != nil {
			return fmt.Errorf("no --nats-url and no running cairn up in %s: %w", dataDir, err)
		}
		natsURL = ep.NATS
	}
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfigPath)
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	rc.QPS, rc.Burst = -1, -1
	nc, err := nats.Connect(natsURL, nats.Name("cairn-controller-manager"), nats.MaxReconnects(-1))
	if err != nil {
		return fmt.Errorf("nats %s: %w", natsURL, err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("jetstream: %w", err)
	}
	m, err := manager.New(manager.Config{RestConfig: rc, JS: js, Identity: identity, Shard: true, Workers: workers, ClusterCIDR: clusterCIDR, Log: log})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "controller-manager running (%v)\n", m.Controllers())
	return m.Run(ctx)
}
