package main

import (
	"flag"

	"github.com/cairn-dev/cairn/services/apiserver/servicealloc"
	"github.com/cairn-dev/cairn/services/proxy"
)

// serviceNetFlags are the apiserver's Service network flags, shared by
// cairn apiserver and cairn up (kube-apiserver's names).
type serviceNetFlags struct {
	clusterIPRange, nodePortRange, advertise string
}

func (f *serviceNetFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.clusterIPRange, "service-cluster-ip-range", servicealloc.DefaultClusterIPRange,
		"IPv4 CIDR Services get their cluster IPs from; its first address is the kubernetes Service's (the same on every apiserver)")
	fs.StringVar(&f.nodePortRange, "service-node-port-range", servicealloc.DefaultNodePortRange,
		"port range NodePort Services get their node ports from (the same on every apiserver)")
	fs.StringVar(&f.advertise, "advertise-address", proxy.APIServerAddress,
		"IP address the kubernetes Service's endpoints list for this apiserver; the default is the address at which "+
			"every cairn node's proxy relays to the apiserver from inside the node's network namespace, so that pods reach it "+
			"at 10.96.0.1:443 (empty: the IP of --listen)")
}
