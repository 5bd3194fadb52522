package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/cairn-dev/cairn/events/consumer/shard"
	"github.com/cairn-dev/cairn/services/cairn/up"
	"github.com/cairn-dev/cairn/services/controllers/certificates"
	"github.com/cairn-dev/cairn/services/controllers/csiconn"
	"github.com/cairn-dev/cairn/services/controllers/endpoint"
	"github.com/cairn-dev/cairn/services/controllers/manager"
	"github.com/cairn-dev/cairn/services/controllers/nodeipam"
	"github.com/cairn-dev/cairn/services/controllers/nodelifecycle"
)

// runControllerManager runs one controller-manager replica as its own
// process; any number run active-active, splitting the keys.
func runControllerManager(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var (
		identity, clusterCIDR string
		signingDir            string
		workers, maxPerSlice  int
		nodeGrace, signingFor time.Duration
		leaseTTL              time.Duration
		csiEndpoints          = csiconn.EndpointsFlag{}
	)
	fs := newFlagSet("controller-manager", stderr)
	fs.serviceFlags(up.ControllerManagerKubeconfig, "")
	fs.StringVar(&identity, "identity", "", "this replica's name among the replicas (default hostname-pid)")
	fs.IntVar(&workers, "workers", 4, "concurrent reconciles per controller")
	fs.DurationVar(&leaseTTL, "leader-elect-lease-duration", shard.DefaultLeaseTTL, "how long a replica's partition lease lives without renewal: how long the keys of a dead replica wait before another takes them")
	fs.StringVar(&clusterCIDR, "cluster-cidr", nodeipam.DefaultClusterCIDR, "IPv4 range split into /24 pod CIDRs, one per node")
	fs.DurationVar(&nodeGrace, "node-monitor-grace-period", nodelifecycle.DefaultGracePeriod, "how long a node may go unheard before it is marked unknown and tainted unreachable")
	fs.IntVar(&maxPerSlice, "max-endpoints-per-slice", endpoint.DefaultMaxEndpointsPerSlice, "the most endpoints an EndpointSlice holds")
	fs.StringVar(&signingDir, "cluster-signing-dir", "", "directory of the cluster CA (ca.crt, ca.key: <data-dir>/pki of cairn up) that signs approved "+
		"CertificateSigningRequests (kube's --cluster-signing-cert-file/--cluster-signing-key-file); empty signs none")
	fs.DurationVar(&signingFor, "cluster-signing-duration", certificates.DefaultDuration, "the longest certificate signed for a CertificateSigningRequest (spec.expirationSeconds may ask for less, not under 10m)")
	fs.Var(csiEndpoints, "csi-endpoint", "a CSI driver's controller service, NAME=unix:///path (repeatable): the provisioner and attacher act for these drivers")
	if help, err := fs.parse(args); help || err != nil {
		return err
	}
	log, err := fs.logger(stderr)
	if err != nil {
		return err
	}
	rc, js, closeNATS, err := fs.connectService("controller-manager", log)
	if err != nil {
		return err
	}
	defer closeNATS()
	m, err := manager.New(manager.Config{RestConfig: rc, JS: js, Identity: identity, Shard: true, LeaseTTL: leaseTTL, Workers: workers, ClusterCIDR: clusterCIDR,
		NodeMonitorGracePeriod: nodeGrace, MaxEndpointsPerSlice: int32(maxPerSlice), ClusterSigningDir: signingDir, ClusterSigningDuration: signingFor,
		CSIEndpoints: csiEndpoints, Log: log})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "controller-manager running (%v)\n", m.Controllers())
	return m.Run(ctx)
}
