package proxy

import (
	"crypto/sha256"
	"encoding/base32"
	"encoding/binary"
	"fmt"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"sigs.k8s.io/knftables"
)

// TableName is the nftables table the proxy owns (kube-proxy's is "kube-proxy").
const TableName = "cairn-proxy"

// Names of the table-wide objects, as kube-proxy's nftables mode names them.
const (
	servicesChain         = "services"
	markMasqChain         = "mark-for-masquerade"
	masqueradingChain     = "masquerading"
	rejectChain           = "reject-chain"
	endpointsCheckChain   = "service-endpoints-check"
	nodePortsCheckChain   = "nodeport-endpoints-check"
	serviceIPsMap         = "service-ips"
	firewallCheckChain    = "firewall-check"
	firewallIPsMap        = "firewall-ips"
	serviceNodePortsMap   = "service-nodeports"
	noEndpointServicesMap = "no-endpoint-services"
	noEndpointNodePortMap = "no-endpoint-nodeports"
	// hairpinSet holds "ep . ep" for every endpoint address of the
	// table's Services: a connection DNATed to the address it came from
	// (a pod reaching itself through its Service) is masqueraded.
	hairpinSet = "hairpin"

	// masqueradeMark is kube-proxy's default --masquerade-bit 14.
	masqueradeMark = "0x4000"
	// chainNameMaxLength is nftables' limit on a chain's name.
	chainNameMaxLength = 256
	// noLocalhost keeps NodePorts off 127.0.0.0/8, as kube-proxy does.
	noLocalhost = "ip daddr != 127.0.0.0/8"
)

// element is one map element: its map, key and verdict.
type element struct {
	Map   string
	Key   []string
	Value string
}

func (e element) id() string { return e.Map + " " + strings.Join(e.Key, " . ") }

// serviceRules is everything one Service contributes to the table: its own
// chains (name to rules, in order), its affinity sets and its map elements,
// none of them shared with another Service, which is what lets one Service
// be rewritten alone; and the addresses of its endpoints, whose elements of
// the shared hairpin set the Proxier counts per table (hairpinCounts).
type serviceRules struct {
	Chains   map[string][]string
	Sets     map[string]knftables.Set
	Elements map[string]element
	Hairpin  map[string]bool
}

// endpoint is one backend of a Service port.
type endpoint struct {
	IP   string
	Port int32
}

func (e endpoint) String() string { return net.JoinHostPort(e.IP, strconv.Itoa(int(e.Port))) }

// hashAndTruncate is kube-proxy's: 8 base32 characters of the name's
// SHA-256, a dash and the name, cut to the nftables limit.
func hashAndTruncate(name string) string {
	hash := sha256.Sum256([]byte(name))
	encoded := base32.StdEncoding.EncodeToString(hash[:])
	name = encoded[:8] + "-" + name
	if len(name) > chainNameMaxLength {
		name = name[:chainNameMaxLength-3] + "..."
	}
	return name
}

// portChainBase is kube's servicePortChainNameBase: ns/name/proto/portname.
func portChainBase(svc *v1.Service, port *v1.ServicePort) string {
	return svc.Namespace + "/" + svc.Name + "/" + strings.ToLower(string(protocol(port))) + "/" + port.Name
}

func protocol(port *v1.ServicePort) v1.Protocol {
	if port.Protocol == "" {
		return v1.ProtocolTCP
	}
	return port.Protocol
}

// candidate is one endpoint of a Service port as a slice states it, with
// what kube-proxy's CategorizeEndpoints looks at.
type candidate struct {
	endpoint
	ready, serving, terminating bool
	// local: on this node (its nodeName is Env.NodeName).
	local bool
	zones []string // hints.forZones
}

// gatherEndpoints returns the endpoints of port from slices: IPv4 slices
// only, matched to the port by name and protocol, duplicates across
// slices counted once (the first slice by name wins), sorted so that the
// rules are deterministic.
func gatherEndpoints(port *v1.ServicePort, slices []*discovery.EndpointSlice, nodeName string) []candidate {
	var out []candidate
	seen := map[endpoint]bool{}
	for _, slice := range slices {
		if slice.AddressType != discovery.AddressTypeIPv4 {
			continue
		}
		for _, sp := range slice.Ports {
			if sp.Port == nil || ptrValue(sp.Name) != port.Name || (sp.Protocol != nil && *sp.Protocol != protocol(port)) {
				continue
			}
			for _, ep := range slice.Endpoints {
				if len(ep.Addresses) == 0 {
					continue
				}
				e := endpoint{IP: ep.Addresses[0], Port: *sp.Port}
				if seen[e] {
					continue
				}
				seen[e] = true
				// Unset conditions mean ready and serving, not terminating.
				c := candidate{endpoint: e,
					ready:       ep.Conditions.Ready == nil || *ep.Conditions.Ready,
					terminating: ep.Conditions.Terminating != nil && *ep.Conditions.Terminating,
					local:       nodeName != "" && ep.NodeName != nil && *ep.NodeName == nodeName,
				}
				c.serving = ep.Conditions.Serving == nil && c.ready || ep.Conditions.Serving != nil && *ep.Conditions.Serving
				if ep.Hints != nil {
					for _, z := range ep.Hints.ForZones {
						c.zones = append(c.zones, z.Name)
					}
				}
				out = append(out, c)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// policy is what a Service port's traffic policies make of its
// endpoints (kube's BaseServicePortInfo).
type policy struct {
	// internalLocal: internalTrafficPolicy Local.
	internalLocal bool
	// external: reachable other than by its ClusterIP (a NodePort,
	// externalIPs, load-balancer ingress IPs); externalLocal: and
	// externalTrafficPolicy Local.
	external, externalLocal bool
}

// usesCluster: some traffic goes to endpoints by the Cluster policy. Even
// with externalTrafficPolicy Local, external traffic from pods and from
// the node itself is short-circuited to them.
func (p policy) usesCluster() bool { return !p.internalLocal || p.external }

// usesLocal: some traffic goes to this node's endpoints only.
func (p policy) usesLocal() bool { return p.internalLocal || p.external && p.externalLocal }

// categorized are a Service port's endpoints as kube-proxy's
// CategorizeEndpoints sorts them.
type categorized struct {
	// cluster are used by the Cluster policy (topology hints applied),
	// local by the Local policy; reachable is both together.
	cluster, local, reachable []endpoint
	// any: the Service has a usable endpoint somewhere in the cluster.
	any bool
}

// categorize is kube-proxy's CategorizeEndpoints (pkg/proxy/topology.go):
// usable endpoints are the ready ones or, when none is ready, the serving
// terminating ones, decided apart for the Cluster and Local policies; the
// Cluster policy keeps only the endpoints hinted for zone when every ready
// endpoint has a zone hint and one names zone.
func categorize(cands []candidate, pol policy, zone string) categorized {
	var out categorized
	if len(cands) == 0 {
		return out
	}
	pick := func(keep func(candidate) bool) []endpoint {
		var eps []endpoint
		for _, c := range cands {
			if keep(c) {
				eps = append(eps, c.endpoint)
			}
		}
		return eps
	}
	servingTerminating := func(c candidate) bool { return c.serving && c.terminating }
	byZone := pol.usesCluster() && hintsForZone(cands, zone)
	if pol.usesCluster() {
		out.cluster = pick(func(c candidate) bool { return c.ready && (!byZone || slices.Contains(c.zones, zone)) })
		if len(out.cluster) == 0 {
			out.cluster = pick(servingTerminating)
		}
		out.any = len(out.cluster) > 0
	}
	if !pol.usesLocal() {
		out.reachable = out.cluster
		return out
	}
	var localReady, localTerminating bool
	for _, c := range cands {
		if c.ready || servingTerminating(c) {
			out.any = true
		}
		localReady = localReady || c.local && c.ready
		localTerminating = localTerminating || c.local && !c.ready && servingTerminating(c)
	}
	switch {
	case localReady:
		out.local = pick(func(c candidate) bool { return c.local && c.ready })
	case localTerminating:
		out.local = pick(func(c candidate) bool { return c.local && servingTerminating(c) })
	}
	if !pol.usesCluster() {
		out.reachable = out.local
		return out
	}
	// The union: the cluster endpoints may be remote ones, the local ones
	// terminating or outside the zone.
	seen := map[endpoint]bool{}
	for _, e := range append(slices.Clone(out.cluster), out.local...) {
		if !seen[e] {
			seen[e] = true
			out.reachable = append(out.reachable, e)
		}
	}
	sort.Slice(out.reachable, func(i, j int) bool { return out.reachable[i].String() < out.reachable[j].String() })
	return out
}

// hintsForZone is kube's topologyModeFromHints for zones: every ready
// endpoint has a zone hint and at least one is hinted for zone.
func hintsForZone(cands []candidate, zone string) bool {
	anyReady, forZone := false, false
	for _, c := range cands {
		if !c.ready {
			continue
		}
		anyReady = true
		if len(c.zones) == 0 {
			return false
		}
		forZone = forZone || slices.Contains(c.zones, zone)
	}
	return anyReady && forZone && zone != ""
}

func ptrValue(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// hasClusterIP says whether the proxy programs svc at all: headless and
// ExternalName Services have no virtual address.
func hasClusterIP(svc *v1.Service) bool {
	ip := net.ParseIP(svc.Spec.ClusterIP)
	return ip != nil && ip.To4() != nil && svc.Spec.Type != v1.ServiceTypeExternalName
}

// Env is what a Service's rules depend on besides the Service and its
// EndpointSlices.
type Env struct {
	// ClusterCIDR, when set, masquerades traffic to a ClusterIP from
	// outside it (kube-proxy's --cluster-cidr local detector) and sends
	// pods' traffic to an externalTrafficPolicy Local Service by the
	// Cluster policy.
	ClusterCIDR string
	// NodeName says which endpoints are local (their nodeName).
	NodeName string
	// Zone is the node's topology.kubernetes.io/zone label, for hints.
	Zone string
}

// buildService computes the rules of one Service from its EndpointSlices.
func buildService(svc *v1.Service, slices []*discovery.EndpointSlice, env Env) *serviceRules {
	r := &serviceRules{Chains: map[string][]string{}, Sets: map[string]knftables.Set{}, Elements: map[string]element{}, Hairpin: map[string]bool{}}
	if !hasClusterIP(svc) {
		return r
	}
	for i := range svc.Spec.Ports {
		port := &svc.Spec.Ports[i]
		buildPort(r, svc, port, gatherEndpoints(port, slices, env.NodeName), env)
	}
	return r
}

func (r *serviceRules) addElement(e element) { r.Elements[e.id()] = e }

// externalIPs are svc's IPv4 externalIPs, then its IPv4
// status.loadBalancer.ingress IPs (kube's LoadBalancerVIPs: not those
// whose ipMode is Proxy, which the load balancer itself forwards to the
// node).
func externalIPs(svc *v1.Service) (external, lb []string) {
	for _, ip := range svc.Spec.ExternalIPs {
		if isIPv4(ip) {
			external = append(external, ip)
		}
	}
	if svc.Spec.Type == v1.ServiceTypeLoadBalancer {
		for _, in := range svc.Status.LoadBalancer.Ingress {
			if isIPv4(in.IP) && (in.IPMode == nil || *in.IPMode != v1.LoadBalancerIPModeProxy) {
				lb = append(lb, in.IP)
			}
		}
	}
	return external, lb
}

// sourceRanges are svc's IPv4 loadBalancerSourceRanges, as nft prints
// them (a /32 as the bare address), sorted.
func sourceRanges(svc *v1.Service) []string {
	var out []string
	for _, r := range svc.Spec.LoadBalancerSourceRanges {
		_, n, err := net.ParseCIDR(strings.TrimSpace(r))
		if err != nil || n.IP.To4() == nil {
			continue
		}
		if ones, _ := n.Mask.Size(); ones == 32 {
			out = append(out, n.IP.String())
		} else {
			out = append(out, n.String())
		}
	}
	sort.Slice(out, func(i, j int) bool { return ipv4Key(out[i]) < ipv4Key(out[j]) })
	return slices.Compact(out)
}

// ipv4Key orders addresses and CIDRs by their first address.
func ipv4Key(s string) uint32 {
	ip, _, _ := strings.Cut(s, "/")
	return binary.BigEndian.Uint32(net.ParseIP(ip).To4())
}

func isIPv4(s string) bool {
	ip := net.ParseIP(s)
	return ip != nil && ip.To4() != nil
}

// servicePolicy is kube's reading of svc's traffic policies for one port.
func servicePolicy(svc *v1.Service, port *v1.ServicePort) policy {
	ext, lb := externalIPs(svc)
	p := policy{
		internalLocal: svc.Spec.InternalTrafficPolicy != nil && *svc.Spec.InternalTrafficPolicy == v1.ServiceInternalTrafficPolicyLocal,
		external:      nodePortOf(svc, port) != 0 || len(ext) > 0 || len(lb) > 0,
	}
	p.externalLocal = p.external && svc.Spec.ExternalTrafficPolicy == v1.ServiceExternalTrafficPolicyLocal
	return p
}

// nodePortOf is port's NodePort where svc's type has NodePorts, else 0.
func nodePortOf(svc *v1.Service, port *v1.ServicePort) int32 {
	if svc.Spec.Type == v1.ServiceTypeNodePort || svc.Spec.Type == v1.ServiceTypeLoadBalancer {
		return port.NodePort
	}
	return 0
}

// buildPort writes one port's rules as kube-proxy's nftables mode does
// (syncProxyRules): a Cluster-policy chain (service-) and a Local-policy
// chain (local-) that DNAT to one of their endpoints through a numgen map
// (with session affinity, through an endpoint- chain per endpoint that
// remembers the client), the ClusterIP going to the one of
// internalTrafficPolicy, and an external- chain for NodePort, externalIPs
// and load-balancer IPs that masquerades (Cluster) or keeps the client's
// address and goes to the local endpoints (Local). An address without
// usable endpoints is refused when the Service has none anywhere, and
// dropped when only a Local policy has none on this node.
func buildPort(r *serviceRules, svc *v1.Service, port *v1.ServicePort, cands []candidate, env Env) {
	base := portChainBase(svc, port)
	proto := strings.ToLower(string(protocol(port)))
	portStr := strconv.Itoa(int(port.Port))
	pol := servicePolicy(svc, port)
	eps := categorize(cands, pol, env.Zone)
	extIPs, lbIPs := externalIPs(svc)
	nodePort := nodePortOf(svc, port)

	clusterChain := "service-" + hashAndTruncate(base)
	localChain := "local-" + hashAndTruncate(base)
	extChain := "external-" + hashAndTruncate(base)
	internalChain, hasInternal := clusterChain, eps.any
	if pol.internalLocal {
		internalChain, hasInternal = localChain, len(eps.local) > 0
	}
	externalPolicyChain, hasExternal := clusterChain, eps.any
	if pol.externalLocal {
		externalPolicyChain, hasExternal = localChain, len(eps.local) > 0
	}
	internalVerdict, externalVerdict := "drop", "drop"
	if !eps.any {
		internalVerdict, externalVerdict = "goto "+rejectChain, "goto "+rejectChain
	}

	key := func(ip string) []string { return []string{ip, proto, portStr} }
	if hasInternal {
		r.addElement(element{Map: serviceIPsMap, Key: key(svc.Spec.ClusterIP), Value: "goto " + internalChain})
	} else {
		r.addElement(element{Map: noEndpointServicesMap, Key: key(svc.Spec.ClusterIP), Value: internalVerdict})
	}
	for _, ip := range append(slices.Clone(extIPs), lbIPs...) {
		if eps.any {
			r.addElement(element{Map: serviceIPsMap, Key: key(ip), Value: "goto " + extChain})
		}
		if !hasExternal {
			r.addElement(element{Map: noEndpointServicesMap, Key: key(ip), Value: externalVerdict})
		}
	}
	// loadBalancerSourceRanges: connections to the load-balancer IPs from
	// elsewhere are dropped before DNAT (NodePorts are not subject to it,
	// as in kube).
	if ranges := sourceRanges(svc); len(lbIPs) > 0 && len(ranges) > 0 {
		fwChain := "firewall-" + hashAndTruncate(base)
		r.Chains[fwChain] = []string{knftables.Concat("ip saddr != {", strings.Join(ranges, ", "), "} drop")}
		for _, ip := range lbIPs {
			r.addElement(element{Map: firewallIPsMap, Key: key(ip), Value: "goto " + fwChain})
		}
	}
	if nodePort != 0 {
		npKey := []string{proto, strconv.Itoa(int(nodePort))}
		if eps.any {
			r.addElement(element{Map: serviceNodePortsMap, Key: npKey, Value: "goto " + extChain})
		}
		if !hasExternal {
			r.addElement(element{Map: noEndpointNodePortMap, Key: npKey, Value: externalVerdict})
		}
	}
	if !eps.any {
		return
	}

	if pol.external {
		var ext []string
		if !pol.externalLocal {
			// Cluster: masqueraded, so that replies come back through
			// this node.
			ext = append(ext, "jump "+markMasqChain)
		} else {
			// Local: the client's address is kept. Pods and the node
			// itself are short-circuited to the Cluster policy, as if
			// they went out to a load balancer and came back; the node's
			// own traffic is masqueraded (its source is a local address).
			if env.ClusterCIDR != "" {
				ext = append(ext, knftables.Concat("ip saddr", env.ClusterCIDR, "goto", clusterChain))
			}
			ext = append(ext,
				knftables.Concat("fib saddr type local jump", markMasqChain),
				knftables.Concat("fib saddr type local goto", clusterChain))
		}
		if hasExternal {
			ext = append(ext, "goto "+externalPolicyChain)
		}
		r.Chains[extChain] = ext
	}

	affinity := affinitySet(svc)
	policyChain := func(chain string, eps []endpoint) {
		var rules []string
		if chain == internalChain && hasInternal && env.ClusterCIDR != "" {
			rules = append(rules, knftables.Concat(
				"ip daddr", svc.Spec.ClusterIP, proto, "dport", portStr, "ip saddr !=", env.ClusterCIDR, "jump", markMasqChain))
		}
		if affinity == nil {
			// No per-endpoint state: one rule picks and DNATs.
			r.Chains[chain] = append(rules, dnatMap(proto, eps))
			return
		}
		var vmap []string
		for i, ep := range eps {
			epChain := "endpoint-" + hashAndTruncate(endpointBase(base, ep))
			rules = append(rules, knftables.Concat("ip saddr", "@"+affinitySetName(base, ep), "goto", epChain))
			vmap = append(vmap, fmt.Sprintf("%d : goto %s", i, epChain))
		}
		rules = append(rules, knftables.Concat("numgen random mod", len(eps), "vmap {", strings.Join(vmap, " , "), "}"))
		r.Chains[chain] = rules
	}
	if len(eps.cluster) > 0 && pol.usesCluster() {
		policyChain(clusterChain, eps.cluster)
	}
	if len(eps.local) > 0 && pol.usesLocal() {
		policyChain(localChain, eps.local)
	}
	for _, ep := range eps.reachable {
		r.Hairpin[ep.IP] = true
		if affinity == nil {
			continue
		}
		// Session affinity: an endpoint chain adds the client to the
		// endpoint's own set, the clients it served recently.
		set := *affinity
		set.Name = affinitySetName(base, ep)
		r.Sets[set.Name] = set
		r.Chains["endpoint-"+hashAndTruncate(endpointBase(base, ep))] = []string{
			knftables.Concat("update", "@"+set.Name, "{ ip saddr }"),
			knftables.Concat("meta l4proto", proto, "dnat to", ep.String()),
		}
	}
}

// dnatMap is the rule that DNATs to one of eps with equal probability:
// a random number looked up in an anonymous map of address . port, so that
// a Service needs no chain per endpoint (the kernel's commit visits every
// chain of the namespace: doc.go, Cost).
func dnatMap(proto string, eps []endpoint) string {
	items := make([]string, len(eps))
	for i, ep := range eps {
		items[i] = fmt.Sprintf("%d : %s . %d", i, ep.IP, ep.Port)
	}
	return knftables.Concat("meta l4proto", proto, "dnat ip to numgen random mod", len(eps), "map {", strings.Join(items, ", "), "}")
}

func affinitySetName(base string, ep endpoint) string {
	return "affinity-" + hashAndTruncate(endpointBase(base, ep))
}

// endpointBase is kube's servicePortEndpointChainNameBase before the hash:
// IP/port, since a colon would read as IPv6.
func endpointBase(base string, ep endpoint) string {
	return base + "__" + ep.IP + "/" + strconv.Itoa(int(ep.Port))
}

// affinitySet is the template of svc's affinity sets (nil without
// sessionAffinity ClientIP).
func affinitySet(svc *v1.Service) *knftables.Set {
	if svc.Spec.SessionAffinity != v1.ServiceAffinityClientIP {
		return nil
	}
	timeout := int32(v1.DefaultClientIPServiceAffinitySeconds)
	if c := svc.Spec.SessionAffinityConfig; c != nil && c.ClientIP != nil && c.ClientIP.TimeoutSeconds != nil {
		timeout = *c.ClientIP.TimeoutSeconds
	}
	return &knftables.Set{
		Type:    "ipv4_addr",
		Flags:   []knftables.SetFlag{knftables.DynamicFlag, knftables.TimeoutFlag},
		Timeout: knftables.PtrTo(secondsDuration(timeout)),
	}
}
