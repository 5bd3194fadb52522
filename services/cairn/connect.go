package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/cairn-dev/cairn/services/failover"
)

// connectService builds the rest config (no client-side rate limit:
// services are trusted) and the JetStream client of a service (see
// serviceFlags); close closes the NATS connection. Over HTTPS the config
// fails over between all apiservers (package failover), refreshed from the
// default/kubernetes EndpointSlice every 10 s until close, as the
// controller-managers, schedulers, kubelets and proxies of k3s agents
// do; NATS clients learn the other servers of a NATS cluster themselves.
func (f *cmdFlags) connectService(name string, log *slog.Logger) (rc *rest.Config, js jetstream.JetStream, closeAll func(), err error) {
	rc, err = f.restConfig()
	if err != nil {
		return nil, nil, nil, err
	}
	rc.QPS, rc.Burst = -1, -1
	ep, err := f.endpoints()
	if err != nil {
		return nil, nil, nil, err
	}
	nc, js, err := connectNATS(ep.NATS, "cairn-"+name, nats.MaxReconnects(-1))
	if err != nil {
		return nil, nil, nil, err
	}
	if !strings.HasPrefix(rc.Host, "https://") {
		return rc, js, nc.Close, nil
	}
	eps, err := failover.New([]string{rc.Host}, log.With("component", "failover"))
	if err != nil {
		nc.Close()
		return nil, nil, nil, err
	}
	rc = eps.Wrap(rc)
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		nc.Close()
		return nil, nil, nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		eps.Run(ctx, client, 10*time.Second)
	}()
	return rc, js, func() { cancel(); <-done; nc.Close() }, nil
}

// connectLog opens etcd and JetStream clients for the tools that read both
// (events tail and verify).
func (f *cmdFlags) connectLog() (*clientv3.Client, *nats.Conn, jetstream.JetStream, error) {
	ep, err := f.endpoints()
	if err != nil {
		return nil, nil, nil, err
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: ep.Etcd, DialTimeout: 5 * time.Second, Logger: zap.NewNop(), MaxCallRecvMsgSize: 1 << 30})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("etcd: %w", err)
	}
	nc, js, err := connectNATS(ep.NATS, "cairn-events")
	if err != nil {
		cli.Close()
		return nil, nil, nil, err
	}
	return cli, nc, js, nil
}

func connectNATS(url, name string, opts ...nats.Option) (*nats.Conn, jetstream.JetStream, error) {
	nc, err := nats.Connect(url, append(opts, nats.Name(name))...)
	if err != nil {
		return nil, nil, fmt.Errorf("nats %s: %w", url, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("jetstream: %w", err)
	}
	return nc, js, nil
}
