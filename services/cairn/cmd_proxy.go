package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/cairn-dev/cairn/services/apiserver"
	"github.com/cairn-dev/cairn/services/cairn/join"
	"github.com/cairn-dev/cairn/services/controllers/nodeipam"
	"github.com/cairn-dev/cairn/services/proxy"
)

// runProxy runs a node's service proxy as its own process (kube-proxy's
// job): it programs nftables in the node's network namespace from the
// log's Services and EndpointSlices, relays the apiserver there, and
// serves its metrics.
func runProxy(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var name, netns, clusterCIDR, metricsAddr string
	var minSync time.Duration
	host, _ := os.Hostname()
	fs := newFlagSet("proxy", stderr)
	fs.describe("proxy [flags]", "Run a node's service proxy: ClusterIP and NodePort rules in nftables (table ip "+proxy.TableName+
		") inside the node's network namespace, from the log's Services and EndpointSlices only, and the apiserver at "+
		proxy.APIServerAddress+" there. A proxy runs in process with every real kubelet of cairn up and cairn kubelet; run this "+
		"one for a node whose kubelet runs with --proxy=false.")
	fs.serviceFlags(join.ProxyKubeconfigFile, "kubeconfig to reach the apiserver (default <data-dir>/nodes/<node-name>/"+join.ProxyKubeconfigFile+
		", issued from the cluster CA in <data-dir>/pki for user "+apiserver.UserKubeProxy+" when it does not exist; KUBECONFIG is not read)")
	fs.StringVar(&name, "node-name", strings.ToLower(host), "the node whose proxy this is")
	fs.StringVar(&netns, "netns", "", "the node's network namespace: a name under /run/netns or a path (default cairn-<node-name>, as cairn kubelet's)")
	fs.StringVar(&clusterCIDR, "cluster-cidr", nodeipam.DefaultClusterCIDR, "the pods' range: traffic to a ClusterIP from outside it is masqueraded")
	fs.StringVar(&metricsAddr, "metrics-bind-address", "127.0.0.1:10249", "where /metrics is served (kube-proxy's default); empty: not served")
	fs.DurationVar(&minSync, "min-sync-period", 0, "least time between two syncs; changes meanwhile go into one transaction")
	if help, err := fs.parse(args); help || err != nil {
		return err
	}
	log, err := fs.logger(stderr)
	if err != nil {
		return err
	}
	if fs.kubeconfig == "" {
		path, issued, err := join.ProxyKubeconfig(fs.dataDir, name)
		if err != nil {
			return err
		}
		if issued {
			fmt.Fprintf(stdout, "proxy credentials issued (%s, user %s)\n", path, apiserver.UserKubeProxy)
		}
		fs.defaultKubeconfig = path
	}
	rc, js, closeNATS, err := fs.connectService("proxy", log)
	if err != nil {
		return err
	}
	defer closeNATS()
	reg := prometheus.NewRegistry()
	var wg sync.WaitGroup
	defer wg.Wait()
	if metricsAddr != "" {
		ln, err := net.Listen("tcp", metricsAddr)
		if err != nil {
			return fmt.Errorf("metrics listen: %w", err)
		}
		srv := &http.Server{Handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), ReadHeaderTimeout: 10 * time.Second}
		wg.Go(func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("metrics server", "err", err)
			}
		})
		defer srv.Close()
	}
	ns := nodeNetNSPath(netns, name)
	fmt.Fprintf(stdout, "proxy running (node %s, netns %s)\n", name, ns)
	return proxy.RunNode(ctx, proxy.NodeConfig{RestConfig: rc, JS: js, NodeName: name, NetNS: ns, ClusterCIDR: clusterCIDR,
		MinSyncPeriod: minSync, Metrics: reg, Log: log})
}

// nodeNetNSPath is the path of a node's network namespace from --netns
// (a name under /run/netns or a path), by default cairn-<node>.
func nodeNetNSPath(netns, node string) string {
	if netns == "" {
		netns = "cairn-" + node
	}
	if filepath.IsAbs(netns) {
		return netns
	}
	return filepath.Join("/run/netns", netns)
}

// proxyRestConfig is the rest.Config of a node's proxy from its kubeconfig
// (no client-side rate limit: services are trusted).
func proxyRestConfig(path string) (*rest.Config, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("proxy kubeconfig %s: %w", path, err)
	}
	rc.QPS, rc.Burst = -1, -1
	return rc, nil
}
