package main

import (
	"context"
	"fmt"
	"io"

	"github.com/cairn-dev/cairn/services/clusterdns"
)

// runCoreDNS is CoreDNS (the cluster DNS), as the image cairn.local/coredns
// runs it: `cairn coredns -conf /etc/coredns/Corefile`.
func runCoreDNS(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var conf string
	fs := newFlagSet("coredns", stderr)
	fs.StringVar(&conf, "conf", "Corefile", "the Corefile to serve (CoreDNS's -conf); plugins: "+fmt.Sprint(clusterdns.Plugins))
	if help, err := fs.parse(args); help || err != nil {
		return err
	}
	fmt.Fprintf(stdout, "CoreDNS serving %s\n", conf)
	return clusterdns.Run(ctx, conf)
}
