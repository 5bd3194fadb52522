package main

import (
	"context"
	"fmt"
	"io"

	"github.com/cairn-dev/cairn/services/clusterstatus"
)

// runCluster is `cairn cluster status`.
func runCluster(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "status" {
		fmt.Fprintln(stderr, "usage: cairn cluster status [flags]")
		return errUsage
	}
	fs := newFlagSet("cluster status", stderr)
	fs.describe("cluster status [flags]", "Print the etcd members (started, learner, leader), each stream of the log with its leader and replicas\n"+
		"(current, lag), the NATS servers carrying them, the elected log publisher and its lag, and the owners of\n"+
		"the controller-manager's and scheduler's partitions.\n\n"+findsLog)
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
	return st.Write(stdout)
}
