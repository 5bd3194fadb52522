package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/cairn-dev/cairn/services/cairn/join"
	"github.com/cairn-dev/cairn/services/failover"
	"github.com/cairn-dev/cairn/services/pki/jointoken"
)

// joinedNode is a kubelet that joined with a token: its credentials, the
// servers it fails over between, and its NATS connection.
type joinedNode struct {
	creds  join.Credentials
	eps    *failover.Endpoints
	rc     *rest.Config
	js     jetstream.JetStream
	nc     *nats.Conn
	cancel context.CancelFunc
	done   chan struct{}
}

// joinCluster bootstraps (or finds) the node's credentials in dir and
// connects it to every server it knows: the apiservers through a failover
// transport refreshed from default/kubernetes, NATS with all its URLs
// (nats.go fails over between them and learns the rest of the cluster).
func joinCluster(ctx context.Context, server, token, dir, node string, log *slog.Logger, stdout io.Writer) (*joinedNode, error) {
	if server == "" || token == "" {
		return nil, fmt.Errorf("--join and --join-token go together")
	}
	tok, err := jointoken.Parse(token)
	if err != nil {
		return nil, err
	}
	creds, err := join.Join(ctx, join.Bootstrap{Server: server, Token: tok, Node: node, Dir: dir})
	if err != nil {
		return nil, err
	}
	if creds.Issued {
		fmt.Fprintf(stdout, "node credentials issued through CertificateSigningRequests (%s, user system:node:%s; %s, user system:kube-proxy)\n",
			creds.Kubeconfig, node, creds.ProxyKubeconfig)
	}
	rc, err := clientcmd.BuildConfigFromFlags("", creds.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", creds.Kubeconfig, err)
	}
	eps, err := failover.New(append(creds.Servers.APIServers, strings.TrimPrefix(rc.Host, "https://")), log.With("component", "failover"))
	if err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithCancel(ctx)
	rc, _, err = join.RotateClientCertificate(runCtx, dir, node, rc, eps.Wrap, log.With("component", "certificate-manager"))
	if err != nil {
		cancel()
		return nil, err
	}
	servers := creds.Servers
	eps.OnChange = func(hosts []string) {
		servers.APIServers = hosts
		if err := join.WriteServers(dir, servers); err != nil {
			log.Warn("keeping the servers list", "err", err)
		}
	}
	rc = eps.Wrap(rc)
	rc.QPS, rc.Burst = -1, -1
	if urls, err := join.FetchNATS(ctx, rc); err == nil {
		servers.NATS = urls
	}
	nc, err := nats.Connect(strings.Join(servers.NATS, ","), nats.Name("cairn-kubelet-"+node), nats.MaxReconnects(-1),
		nats.RetryOnFailedConnect(true), nats.ReconnectWait(500*time.Millisecond))
	if err != nil {
		cancel()
		return nil, fmt.Errorf("nats %v: %w", servers.NATS, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		cancel()
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		nc.Close()
		cancel()
		return nil, err
	}
	j := &joinedNode{creds: creds, eps: eps, rc: rc, js: js, nc: nc, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(j.done)
		eps.Run(runCtx, client, 10*time.Second)
	}()
	return j, nil
}

func (j *joinedNode) close() {
	j.cancel()
	<-j.done
	j.nc.Close()
}
