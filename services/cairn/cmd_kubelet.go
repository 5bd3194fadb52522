package main

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/client-go/rest"

	"github.com/cairn-dev/cairn/services/apiserver"
	"github.com/cairn-dev/cairn/services/cairn/join"
	"github.com/cairn-dev/cairn/services/controllers/nodeipam"
	"github.com/cairn-dev/cairn/services/kubelet"
)

// runKubelet runs a node agent as its own process: one real node on a
// private containerd (--runtime cri, root), or many hollow nodes for
// benchmarks (--runtime hollow --hollow-nodes N).
func runKubelet(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var (
		name, runtime, rootDir, addr string
		nodeIP, netns, clientCAFile  string
		proxyKubeconfig, clusterCIDR string
		runProxy                     bool
		joinURL, joinToken           string
		hollowNodes                  int
		dnsFlags                     kubeletDNSFlags
		hollowDelay                  time.Duration
	)
	host, _ := os.Hostname()
	fs := newFlagSet("kubelet", stderr)
	fs.serviceFlags(join.KubeconfigFile, "kubeconfig to reach the apiserver (default <data-dir>/nodes/<node-name>/"+join.KubeconfigFile+
		", issued from the cluster CA in <data-dir>/pki for user system:node:<node-name>, group system:nodes, when it does not exist; "+
		"with --runtime hollow <data-dir>/nodes/<node-name>/"+join.HollowKubeconfigFile+" for user cairn:hollow-kubelet:<node-name>, group cairn:hollow-nodes; "+
		"KUBECONFIG is not read, as by kube's kubelet)")
	fs.StringVar(&name, "node-name", strings.ToLower(host), "the node's name (hollow nodes: the prefix of their names)")
	fs.StringVar(&runtime, "runtime", "cri", "cri: real pods on a private containerd (needs root); hollow: simulated pods, for benchmarks")
	fs.IntVar(&hollowNodes, "hollow-nodes", 1, "how many hollow nodes to run (--runtime hollow)")
	fs.DurationVar(&hollowDelay, "hollow-start-delay", time.Second, "how long a hollow pod takes to start")
	fs.StringVar(&rootDir, "root-dir", "", "the node's state: containerd, pod volumes, logs (default <data-dir>/nodes/<node-name>)")
	fs.StringVar(&addr, "address", "127.0.0.1:10250", "address of the kubelet's HTTPS API (logs, exec)")
	fs.StringVar(&nodeIP, "node-ip", "127.0.0.1", "the node's InternalIP: where the apiserver reaches the kubelet")
	fs.StringVar(&netns, "netns", "", "network namespace of the node's pods (default cairn-<node-name>)")
	fs.StringVar(&clientCAFile, "client-ca-file", "", "PEM CA bundle that verifies the client certificates of the kubelet's HTTPS API; "+
		"only clients in group system:masters (the apiserver's kubelet client, an admin) may read logs and exec, "+
		"a request without a verified certificate gets 401 (default: the CA of the kubeconfig, certificate-authority-data "+
		"or certificate-authority, which is the cluster CA of cairn up)")
	fs.BoolVar(&runProxy, "proxy", true, "run the node's service proxy in process (--runtime cri; see cairn proxy)")
	fs.StringVar(&proxyKubeconfig, "proxy-kubeconfig", "", "kubeconfig of the node's proxy (default <data-dir>/nodes/<node-name>/"+
		join.ProxyKubeconfigFile+", issued for user "+apiserver.UserKubeProxy+" when it does not exist)")
	fs.StringVar(&clusterCIDR, "cluster-cidr", nodeipam.DefaultClusterCIDR, "the pods' range, for the proxy")
	fs.StringVar(&joinURL, "join", "", "https://ADDR:PORT of a server to join with --join-token: the node gets its own client certificates "+
		"through CertificateSigningRequests (TLS bootstrapping), keeps them in <data-dir>/nodes/<node-name>, and fails over between all servers")
	fs.StringVar(&joinToken, "join-token", "", "the cluster's join token (K10<ca-hash>::<id>.<secret>: <data-dir>/join-token of the first server, or cairn token create)")
	dnsFlags.register(fs.FlagSet)
	if help, err := fs.parse(args); help || err != nil {
		return err
	}
	if runtime != "cri" && runtime != "hollow" {
		return fmt.Errorf("--runtime %q: want cri or hollow", runtime)
	}
	log, err := fs.logger(stderr)
	if err != nil {
		return err
	}
	var joined *joinedNode
	if joinURL != "" || joinToken != "" {
		if runtime == "hollow" && hollowNodes != 1 {
			return errors.New("--join with --runtime hollow runs one node, named --node-name (--hollow-nodes 1)")
		}
		if joined, err = joinCluster(ctx, joinURL, joinToken, join.NodeDir(fs.dataDir, name), name, log, stdout); err != nil {
			return err
		}
		defer joined.close()
	} else if fs.kubeconfig == "" {
		issue, user := join.NodeKubeconfig, apiserver.NodeUserPrefix+name
		if runtime == "hollow" {
			issue, user = join.HollowKubeconfig, apiserver.HollowKubeletUserPrefix+name
		}
		path, issued, err := issue(fs.dataDir, name)
		if err != nil {
			return err
		}
		if issued {
			fmt.Fprintf(stdout, "node credentials issued (%s, user %s)\n", path, user)
		}
		fs.defaultKubeconfig = path
	}
	var (
		rc *rest.Config
		js jetstream.JetStream
	)
	if joined != nil {
		rc, js = joined.rc, joined.js
	} else {
		var closeNATS func()
		if rc, js, closeNATS, err = fs.connectService("kubelet", log); err != nil {
			return err
		}
		defer closeNATS()
	}
	if runtime == "hollow" && joined != nil {
		fmt.Fprintf(stdout, "kubelet running hollow node %s\n", name)
		return kubelet.RunHollow(ctx, kubelet.HollowConfig{RestConfig: rc, JS: js, Nodes: 1, Name: name,
			StartDelay: hollowDelay, Log: log})
	}
	if runtime == "hollow" {
		fmt.Fprintf(stdout, "kubelet running %d hollow nodes (%s0..%s%d)\n", hollowNodes, name+"-", name+"-", hollowNodes-1)
		return kubelet.RunHollow(ctx, kubelet.HollowConfig{RestConfig: rc, JS: js, Nodes: hollowNodes, NamePrefix: name + "-",
			StartDelay: hollowDelay, Log: log})
	}
	if rootDir == "" {
		rootDir = join.NodeDir(fs.dataDir, name)
	}
	if netns == "" {
		netns = "cairn-" + name
	}
	clientCAs, err := kubeletClientCAs(clientCAFile, rc)
	if err != nil {
		return err
	}
	if clientCAs == nil {
		log.Warn("no --client-ca-file and no CA in the kubeconfig: the kubelet's API refuses every request for logs and exec (401)")
	}
	var px *kubelet.ProxyConfig
	if runProxy {
		if proxyKubeconfig == "" && joined != nil {
			proxyKubeconfig = joined.creds.ProxyKubeconfig
		}
		if proxyKubeconfig == "" {
			path, issued, err := join.ProxyKubeconfig(fs.dataDir, name)
			if err != nil {
				return err
			}
			if issued {
				fmt.Fprintf(stdout, "proxy credentials issued (%s, user %s)\n", path, apiserver.UserKubeProxy)
			}
			proxyKubeconfig = path
		}
		prc, err := proxyRestConfig(proxyKubeconfig)
		if err != nil {
			return err
		}
		if joined != nil {
			prc = joined.eps.Wrap(prc)
		}
		px = &kubelet.ProxyConfig{RestConfig: prc, ClusterCIDR: clusterCIDR}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("kubelet listen: %w", err)
	}
	return kubelet.RunNode(ctx, kubelet.NodeConfig{RestConfig: rc, JS: js, NodeName: name, Dir: rootDir, NetNS: netns,
		Listener: ln, NodeIP: nodeIP, ClientCAs: clientCAs, Proxy: px, Log: log,
		ClusterDNS: dnsFlags.servers(), ClusterDomain: dnsFlags.clusterDomain, ResolvConf: dnsFlags.resolvConf,
		Ready: func() { fmt.Fprintf(stdout, "kubelet running (node %s, https://%s)\n", name, ln.Addr()) }})
}

// kubeletClientCAs is the pool of --client-ca-file, or else of the
// kubeconfig's CA (certificate-authority-data, or the certificate-authority
// file), or nil when there is neither.
func kubeletClientCAs(file string, rc *rest.Config) (*x509.CertPool, error) {
	var pemData []byte
	switch {
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("--client-ca-file: %w", err)
		}
		pemData = b
	case len(rc.TLSClientConfig.CAData) > 0:
		file = "the kubeconfig's certificate-authority-data"
		pemData = rc.TLSClientConfig.CAData
	case rc.TLSClientConfig.CAFile != "":
		file = rc.TLSClientConfig.CAFile
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("kubeconfig certificate-authority: %w", err)
		}
		pemData = b
	default:
		return nil, nil
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemData) {
		return nil, fmt.Errorf("client CA %s: no PEM certificate", file)
	}
	return pool, nil
}
