package main

import (
	"flag"
	"fmt"
	"path/filepath"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/cairn-dev/cairn/services/embedded/endpoints"
)

// serviceFlags are the connection flags of every service that runs as its
// own process next to a `cairn up` (controller-manager, scheduler,
// kubelet): by default it finds its kubeconfig and the NATS URL in the
// data directory of that `cairn up`.
type serviceFlags struct {
	dataDir, kubeconfig, natsURL, logLevel string
	// kubeconfigFile is the default kubeconfig's name in the data dir.
	kubeconfigFile string
}

func (f *serviceFlags) register(fs *flag.FlagSet, kubeconfigFile string) {
	f.kubeconfigFile = kubeconfigFile
	fs.StringVar(&f.dataDir, "data-dir", "./.cairn", "data directory of a running `cairn up`: its kubeconfig for this service and its NATS endpoint are used unless given below")
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig to reach the apiserver (default <data-dir>/"+kubeconfigFile+")")
	fs.StringVar(&f.natsURL, "nats-url", "", "NATS URL of the log (default from <data-dir>/"+endpoints.File+")")
	fs.StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, warn or error")
}

// connect builds the rest config and the JetStream client; close closes
// the NATS connection.
func (f *serviceFlags) connect(name string) (rc *rest.Config, js jetstream.JetStream, close func(), err error) {
	path := f.kubeconfig
	if path == "" {
		path = filepath.Join(f.dataDir, f.kubeconfigFile)
	}
	url := f.natsURL
	if url == "" {
		ep, err := endpoints.Read(endpoints.Path(f.dataDir))
		if err != nil {
			return nil, nil, nil, fmt.Errorf("no --nats-url and no running cairn up in %s: %w", f.dataDir, err)
		}
		url = ep.NATS
	}
	rc, err = clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("kubeconfig: %w", err)
	}
	rc.QPS, rc.Burst = -1, -1
	nc, err := nats.Connect(url, nats.Name("cairn-"+name), nats.MaxReconnects(-1))
	if err != nil {
		return nil, nil, nil, fmt.Errorf("nats %s: %w", url, err)
	}
	js, err = jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, nil, fmt.Errorf("jetstream: %w", err)
	}
	return rc, js, nc.Close, nil
}
