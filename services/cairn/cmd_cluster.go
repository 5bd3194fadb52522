package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/cairn-dev/cairn/services/clusterstatus"
	"github.com/cairn-dev/cairn/services/controlplane"
)

// runCluster is `cairn cluster status` and `cairn cluster remove NAME`.
func runCluster(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "remove" {
		return runClusterRemove(ctx, args[1:], stdout, stderr)
	}
	if len(args) == 0 || args[0] != "status" {
		fmt.Fprintln(stderr, "usage: cairn cluster status [flags] | cairn cluster remove NAME [flags]")
		return errUsage
	}
	fs := newFlagSet("cluster status", stderr)
	fs.describe("cluster status [flags]", "Print the etcd members (started, learner, leader), each stream of the log with its leader and replicas\n"+
		"(current, lag), the NATS servers carrying them and, on servers joined into one cluster, the JetStream meta\n"+
		"group (peers, leader), the elected log publisher and its lag, and the owners of the controller-manager's and\n"+
		"scheduler's partitions.\n\n"+findsLog)
	fs.clientFlags()
	fs.logFlags(true)
	if help, err := fs.parse(args[1:]); help || err != nil {
		return err
	}
	cli, nc, js, err := fs.connectLog()
	if err != nil {
		return err
	}
	defer cli.Close()
	defer nc.Close()
	st, err := clusterstatus.Gather(ctx, cli, js)
	if err != nil {
		return err
	}
	// The meta group is what a server's NATS knows: asked of its
	// apiserver, when the kubeconfig reaches one of clustered servers.
	if rc, err := fs.restConfig(); err == nil {
		var list controlplane.ServerList
		if raw, err := serversRequest(rc).Get().AbsPath(controlplane.ServersPath).DoRaw(ctx); err == nil && json.Unmarshal(raw, &list) == nil {
			st.Servers = list.Servers
			st.Meta = &list.NATS
		}
	}
	return st.Write(stdout)
}

func serversRequest(rc *rest.Config) rest.Interface {
	c, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return &rest.RESTClient{}
	}
	return c.CoreV1().RESTClient()
}

// runClusterRemove is `cairn cluster remove NAME`: through the apiserver
// of another server (DELETE controlplane.ServersPath/NAME).
func runClusterRemove(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("cluster remove", stderr)
	fs.describe("cluster remove NAME [flags]", "Remove the server NAME (as cluster status lists it) from the cluster: its record, its share of the\n"+
		"streams' replicas (lowered to 1 below three servers), its JetStream peer and its etcd member. Stop the server\n"+
		"first, and ask another server (its kubeconfig or data directory).\n\n"+findsCluster)
	fs.clientFlags()
	if len(args) == 0 || args[0] == "" || args[0][0] == '-' {
		fmt.Fprintln(stderr, "usage: cairn cluster remove NAME [flags]")
		return errUsage
	}
	name := args[0]
	if help, err := fs.parse(args[1:]); help || err != nil {
		return err
	}
	rc, err := fs.restConfig()
	if err != nil {
		return err
	}
	// Do and Error, not DoRaw: the refusal's Status message (no quorum,
	// not found) is decoded from the body.
	if err := serversRequest(rc).Delete().AbsPath(controlplane.ServersPath, name).Do(ctx).Error(); err != nil {
		return fmt.Errorf("cluster remove %s: %w", name, oneLine(err))
	}
	fmt.Fprintf(stdout, "server %s removed\n", name)
	return nil
}
