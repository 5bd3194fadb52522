package proxy

import (
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"net"
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
	serviceNodePortsMap   = "service-nodeports"
	noEndpointServicesMap = "no-endpoint-services"
	noEndpointNodePortMap = "no-endpoint-nodeports"

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
// chains (name to rules, in order), its affinity sets and its map elements.
// Nothing in it is shared with another Service, which is what lets one
// Service be rewritten alone.
type serviceRules struct {
	Chains   map[string][]string
	Sets     map[string]knftables.Set
	Elements map[string]element
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

// selectEndpoints returns the endpoints of port from slices as kube-proxy
// picks them: the ready ones, or, when none is ready, the serving and
// terminating ones (KEP-1669). Duplicates across slices count once; the
// result is sorted so that the rules are deterministic.
func selectEndpoints(port *v1.ServicePort, slices []*discovery.EndpointSlice) []endpoint {
	var ready, terminating []endpoint
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
				// Unset conditions mean ready and serving, not terminating.
				isReady := ep.Conditions.Ready == nil || *ep.Conditions.Ready
				serving := ep.Conditions.Serving == nil && isReady || ep.Conditions.Serving != nil && *ep.Conditions.Serving
				isTerminating := ep.Conditions.Terminating != nil && *ep.Conditions.Terminating
				switch {
				case isReady:
					seen[e] = true
					ready = append(ready, e)
				case serving && isTerminating:
					seen[e] = true
					terminating = append(terminating, e)
				}
			}
		}
	}
	chosen := ready
	if len(chosen) == 0 {
		chosen = terminating
	}
	sort.Slice(chosen, func(i, j int) bool { return chosen[i].String() < chosen[j].String() })
	return chosen
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

// buildService computes the rules of one Service from its EndpointSlices.
// clusterCIDR, when set, masquerades traffic to the ClusterIP from outside
// it (kube-proxy's --cluster-cidr local detector).
func buildService(svc *v1.Service, slices []*discovery.EndpointSlice, clusterCIDR string) *serviceRules {
	r := &serviceRules{Chains: map[string][]string{}, Sets: map[string]knftables.Set{}, Elements: map[string]element{}}
	if !hasClusterIP(svc) {
		return r
	}
	for i := range svc.Spec.Ports {
		buildPort(r, svc, &svc.Spec.Ports[i], selectEndpoints(&svc.Spec.Ports[i], slices), clusterCIDR)
	}
	return r
}

func (r *serviceRules) addElement(e element) { r.Elements[e.id()] = e }

func buildPort(r *serviceRules, svc *v1.Service, port *v1.ServicePort, eps []endpoint, clusterCIDR string) {
	base := portChainBase(svc, port)
	proto := strings.ToLower(string(protocol(port)))
	clusterIP := svc.Spec.ClusterIP
	portStr := strconv.Itoa(int(port.Port))
	nodePort := svc.Spec.Type == v1.ServiceTypeNodePort || svc.Spec.Type == v1.ServiceTypeLoadBalancer
	nodePort = nodePort && port.NodePort != 0
	nodePortStr := strconv.Itoa(int(port.NodePort))

	if len(eps) == 0 {
		r.addElement(element{Map: noEndpointServicesMap, Key: []string{clusterIP, proto, portStr}, Value: "goto " + rejectChain})
		if nodePort {
			r.addElement(element{Map: noEndpointNodePortMap, Key: []string{proto, nodePortStr}, Value: "goto " + rejectChain})
		}
		return
	}

	svcChain := "service-" + hashAndTruncate(base)
	var affinity *knftables.Set
	if svc.Spec.SessionAffinity == v1.ServiceAffinityClientIP {
		timeout := int32(v1.DefaultClientIPServiceAffinitySeconds)
		if c := svc.Spec.SessionAffinityConfig; c != nil && c.ClientIP != nil && c.ClientIP.TimeoutSeconds != nil {
			timeout = *c.ClientIP.TimeoutSeconds
		}
		affinity = &knftables.Set{
			Type:    "ipv4_addr",
			Flags:   []knftables.SetFlag{knftables.DynamicFlag, knftables.TimeoutFlag},
			Timeout: knftables.PtrTo(secondsDuration(timeout)),
		}
	}

	var svcRules []string
	if clusterCIDR != "" {
		svcRules = append(svcRules, knftables.Concat(
			"ip daddr", clusterIP, proto, "dport", portStr, "ip saddr !=", clusterCIDR, "jump", markMasqChain))
	}
	var vmap []string
	for i, ep := range eps {
		// kube writes IP/port here: a colon would read as IPv6.
		epBase := base + "__" + ep.IP + "/" + strconv.Itoa(int(ep.Port))
		epChain := "endpoint-" + hashAndTruncate(epBase)
		epRules := []string{knftables.Concat("ip saddr", ep.IP, "jump", markMasqChain)} // hairpin
		if affinity != nil {
			// One set per endpoint: the clients it served recently.
			set := *affinity
			set.Name = "affinity-" + hashAndTruncate(epBase)
			r.Sets[set.Name] = set
			epRules = append(epRules, knftables.Concat("update", "@"+set.Name, "{ ip saddr }"))
			svcRules = append(svcRules, knftables.Concat("ip saddr", "@"+set.Name, "goto", epChain))
		}
		epRules = append(epRules, knftables.Concat("meta l4proto", proto, "dnat to", ep.String()))
		r.Chains[epChain] = epRules
		vmap = append(vmap, fmt.Sprintf("%d : goto %s", i, epChain))
	}
	svcRules = append(svcRules, knftables.Concat("numgen random mod", len(eps), "vmap {", strings.Join(vmap, " , "), "}"))
	r.Chains[svcChain] = svcRules
	r.addElement(element{Map: serviceIPsMap, Key: []string{clusterIP, proto, portStr}, Value: "goto " + svcChain})

	if nodePort {
		// externalTrafficPolicy Cluster: traffic from outside is always
		// masqueraded so that replies come back through this node.
		extChain := "external-" + hashAndTruncate(base)
		r.Chains[extChain] = []string{"jump " + markMasqChain, "goto " + svcChain}
		r.addElement(element{Map: serviceNodePortsMap, Key: []string{proto, nodePortStr}, Value: "goto " + extChain})
	}
}
