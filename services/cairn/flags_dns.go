package main

import (
	"flag"
	"strings"

	"github.com/cairn-dev/cairn/services/clusterdns"
)

// kubeletDNSFlags are the kubelet's DNS flags (kube's names), shared by
// cairn kubelet and cairn up.
type kubeletDNSFlags struct {
	clusterDNS, clusterDomain, resolvConf string
}

func (f *kubeletDNSFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.clusterDNS, "cluster-dns", clusterdns.DefaultClusterIP, "comma-separated DNS server addresses of ClusterFirst pods, "+
		"the kube-dns Service's (cairn up: the tenth address of --service-cluster-ip-range, where it deploys kube-dns); empty: none, "+
		"such pods get the node's resolver")
	fs.StringVar(&f.clusterDomain, "cluster-domain", "cluster.local", "the cluster's DNS domain: pods search <ns>.svc.<domain> svc.<domain> <domain>")
	fs.StringVar(&f.resolvConf, "resolv-conf", "/etc/resolv.conf", "the node's resolver configuration, given to dnsPolicy Default pods; empty: none")
}

// servers is --cluster-dns as a list.
func (f *kubeletDNSFlags) servers() []string {
	var out []string
	for _, s := range strings.Split(f.clusterDNS, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}
