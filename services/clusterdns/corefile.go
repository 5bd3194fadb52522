package clusterdns

import (
	"fmt"
	"strings"
)

// CorefileOptions shape the Corefile cairn writes.
type CorefileOptions struct {
	// Domain is the cluster domain; default cluster.local.
	Domain string
	// Port is the DNS port; default 53.
	Port int
	// Bind, if set, is the one address the DNS server listens on (the bind
	// plugin); empty listens on every address.
	Bind string
	// Health, Ready and Metrics are the addresses of the health (liveness),
	// ready (readiness) and prometheus plugins; defaults ":8080", ":8181"
	// and ":9153" as in kubeadm.
	Health, Ready, Metrics string
	// Forward is the upstream for names outside the cluster domain, as
	// kubeadm's "forward . /etc/resolv.conf"; empty forwards nothing, so
	// such names answer SERVFAIL and no query leaves the cluster.
	Forward string
	// Kubeconfig, if set, is the kubeconfig the kubernetes plugin reads the
	// API with; empty is client-go's in-cluster config (the pod's
	// ServiceAccount).
	Kubeconfig string
	// Endpoint, if set, overrides the kubeconfig's server URL.
	Endpoint string
	// TTL of answers in seconds; default 30.
	TTL int
	// NoReload leaves out the reload plugin (tests that stop quickly).
	NoReload bool
}

func (o CorefileOptions) withDefaults() CorefileOptions {
	def := func(s *string, v string) {
		if *s == "" {
			*s = v
		}
	}
	def(&o.Domain, "cluster.local")
	if o.Port == 0 {
		o.Port = 53
	}
	def(&o.Health, ":8080")
	def(&o.Ready, ":8181")
	def(&o.Metrics, ":9153")
	if o.TTL == 0 {
		o.TTL = 30
	}
	return o
}

// Corefile renders kubeadm's Corefile: errors, health with a lameduck,
// ready, kubernetes for the cluster domain and the reverse zones (pods
// insecure, fallthrough in-addr.arpa ip6.arpa), prometheus, forward and
// loop (only when Forward is set), cache 30 (not for the cluster domain),
// reload and loadbalance.
func Corefile(o CorefileOptions) string {
	o = o.withDefaults()
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	w(".:%d {", o.Port)
	if o.Bind != "" {
		w("    bind %s", o.Bind)
	}
	w("    errors")
	w("    health %s {", o.Health)
	w("       lameduck 5s")
	w("    }")
	w("    ready %s", o.Ready)
	w("    kubernetes %s in-addr.arpa ip6.arpa {", o.Domain)
	if o.Kubeconfig != "" {
		w("       kubeconfig %s", o.Kubeconfig)
	}
	if o.Endpoint != "" {
		w("       endpoint %s", o.Endpoint)
	}
	w("       pods insecure")
	w("       fallthrough in-addr.arpa ip6.arpa")
	w("       ttl %d", o.TTL)
	w("    }")
	w("    prometheus %s", o.Metrics)
	if o.Forward != "" {
		w("    forward . %s {", o.Forward)
		w("       max_concurrent 1000")
		w("    }")
	}
	w("    cache 30 {")
	w("       disable success %s", o.Domain)
	w("       disable denial %s", o.Domain)
	w("    }")
	if o.Forward != "" {
		// loop detects forwarding loops; without forward its probe would
		// only fall off the end of the chain.
		w("    loop")
	}
	if !o.NoReload {
		w("    reload")
	}
	w("    loadbalance")
	w("}")
	return b.String()
}
