package proxy

import (
	"reflect"
	"strconv"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/knftables"
)

const thisNode = "node-a"

func internalLocal(svc *v1.Service) {
	svc.Spec.InternalTrafficPolicy = knftables.PtrTo(v1.ServiceInternalTrafficPolicyLocal)
}

func externalLocal(svc *v1.Service) {
	svc.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
}

func withExternalIPs(ips ...string) func(*v1.Service) {
	return func(svc *v1.Service) { svc.Spec.ExternalIPs = ips }
}

// loadBalancer makes svc a LoadBalancer with NodePort port and the
// ingress IPs, the last one with ipMode Proxy.
func loadBalancer(port int32, ips ...string) func(*v1.Service) {
	return func(svc *v1.Service) {
		svc.Spec.Type = v1.ServiceTypeLoadBalancer
		svc.Spec.Ports[0].NodePort = port
		for i, ip := range ips {
			in := v1.LoadBalancerIngress{IP: ip}
			if i == len(ips)-1 {
				in.IPMode = knftables.PtrTo(v1.LoadBalancerIPModeProxy)
			}
			svc.Status.LoadBalancer.Ingress = append(svc.Status.LoadBalancer.Ingress, in)
		}
	}
}

// on puts the endpoints of s at ips on node.
func on(s *discovery.EndpointSlice, node string, ips ...string) *discovery.EndpointSlice {
	for i := range s.Endpoints {
		for _, ip := range ips {
			if s.Endpoints[i].Addresses[0] == ip {
				s.Endpoints[i].NodeName = knftables.PtrTo(node)
			}
		}
	}
	return s
}

// hinted gives the endpoints of s the zone hints, by address ("" none).
func hinted(s *discovery.EndpointSlice, zones map[string]string) *discovery.EndpointSlice {
	for i := range s.Endpoints {
		if z := zones[s.Endpoints[i].Addresses[0]]; z != "" {
			s.Endpoints[i].Hints = &discovery.EndpointHints{ForZones: []discovery.ForZone{{Name: z}}}
		}
	}
	return s
}

func localChain(svc string) string { return "local-" + hashAndTruncate("ns1/"+svc+"/tcp/p80") }
func extChain(svc string) string   { return "external-" + hashAndTruncate("ns1/"+svc+"/tcp/p80") }

func itoa(i int) string { return strconv.Itoa(i) }

// TestPolicyRules: traffic policies, externalIPs and load-balancer IPs,
// terminating endpoints and zone hints, as kube-proxy's nftables mode
// programs them (its proxier_test.go's TestInternalTrafficPolicy,
// TestExternalTrafficPolicy..., TestTopologyHints expectations).
func TestPolicyRules(t *testing.T) {
	masq := "ip daddr 172.30.0.41 tcp dport 80 ip saddr != " + cidr + " jump mark-for-masquerade"
	svc, local, ext := svcChain("svc1"), localChain("svc1"), extChain("svc1")
	// 10.180.0.1 is on this node, the others elsewhere.
	mixed := func(states ...string) *discovery.EndpointSlice {
		var eps []ep
		for i, st := range states {
			eps = append(eps, ep{"10.180.0." + itoa(i+1), st})
		}
		return on(on(slice("svc1", "s1", eps...), thisNode, "10.180.0.1"), "node-b", "10.180.0.2", "10.180.0.3")
	}
	localETP := []string{
		"ip saddr " + cidr + " goto " + svc,
		"fib saddr type local jump mark-for-masquerade",
		"fib saddr type local goto " + svc,
	}
	tests := []struct {
		name   string
		svc    *v1.Service
		slices []*discovery.EndpointSlice
		zone   string
		// hairpin are the endpoint addresses in the hairpin set.
		hairpin []string
		want    state
	}{{
		name:    "internalTrafficPolicy Local: the ClusterIP goes to this node's endpoints only",
		svc:     service("svc1", "172.30.0.41", internalLocal),
		slices:  []*discovery.EndpointSlice{mixed("ready", "ready")},
		hairpin: []string{"10.180.0.1"},
		want: state{Chains: map[string][]string{
			local: {masq, dnatTo("10.180.0.1")},
		}, Elements: []string{"service-ips: 172.30.0.41 . tcp . 80 : goto " + local}},
	}, {
		name:   "internalTrafficPolicy Local without a local endpoint: dropped",
		svc:    service("svc1", "172.30.0.41", internalLocal),
		slices: []*discovery.EndpointSlice{mixed("unready", "ready")},
		want: state{Chains: map[string][]string{}, Elements: []string{
			"no-endpoint-services: 172.30.0.41 . tcp . 80 : drop",
		}},
	}, {
		name:   "internalTrafficPolicy Local without any endpoint: rejected",
		svc:    service("svc1", "172.30.0.41", internalLocal),
		slices: []*discovery.EndpointSlice{mixed("unready", "unready")},
		want: state{Chains: map[string][]string{}, Elements: []string{
			"no-endpoint-services: 172.30.0.41 . tcp . 80 : goto reject-chain",
		}},
	}, {
		name:    "internalTrafficPolicy Local: a serving terminating local endpoint when none is ready here",
		svc:     service("svc1", "172.30.0.41", internalLocal),
		slices:  []*discovery.EndpointSlice{mixed("terminating", "ready")},
		hairpin: []string{"10.180.0.1"},
		want: state{Chains: map[string][]string{
			local: {masq, dnatTo("10.180.0.1")},
		}, Elements: []string{"service-ips: 172.30.0.41 . tcp . 80 : goto " + local}},
	}, {
		name:    "externalTrafficPolicy Local NodePort: external traffic to local endpoints unmasqueraded",
		svc:     service("svc1", "172.30.0.41", nodePort(30080), externalLocal),
		slices:  []*discovery.EndpointSlice{mixed("ready", "ready")},
		hairpin: []string{"10.180.0.1", "10.180.0.2"},
		want: state{Chains: map[string][]string{
			svc:   {masq, dnatTo("10.180.0.1", "10.180.0.2")},
			local: {dnatTo("10.180.0.1")},
			ext:   append(append([]string{}, localETP...), "goto "+local),
		}, Elements: []string{
			"service-ips: 172.30.0.41 . tcp . 80 : goto " + svc,
			"service-nodeports: tcp . 30080 : goto " + ext,
		}},
	}, {
		name:    "externalTrafficPolicy Local without a local endpoint: external traffic dropped, the ClusterIP served",
		svc:     service("svc1", "172.30.0.41", nodePort(30080), externalLocal),
		slices:  []*discovery.EndpointSlice{mixed("unready", "ready")},
		hairpin: []string{"10.180.0.2"},
		want: state{Chains: map[string][]string{
			svc: {masq, dnatTo("10.180.0.2")},
			ext: localETP,
		}, Elements: []string{
			"no-endpoint-nodeports: tcp . 30080 : drop",
			"service-ips: 172.30.0.41 . tcp . 80 : goto " + svc,
			"service-nodeports: tcp . 30080 : goto " + ext,
		}},
	}, {
		name:    "both Local: a Cluster chain still, for the short-circuit",
		svc:     service("svc1", "172.30.0.41", nodePort(30080), externalLocal, internalLocal),
		slices:  []*discovery.EndpointSlice{mixed("ready", "ready")},
		hairpin: []string{"10.180.0.1", "10.180.0.2"},
		want: state{Chains: map[string][]string{
			svc:   {dnatTo("10.180.0.1", "10.180.0.2")},
			local: {masq, dnatTo("10.180.0.1")},
			ext:   append(append([]string{}, localETP...), "goto "+local),
		}, Elements: []string{
			"service-ips: 172.30.0.41 . tcp . 80 : goto " + local,
			"service-nodeports: tcp . 30080 : goto " + ext,
		}},
	}, {
		name:    "externalIPs and load-balancer ingress IPs (not ipMode Proxy) through the external chain",
		svc:     service("svc1", "172.30.0.41", withExternalIPs("203.0.113.10", "2001:db8::1"), loadBalancer(30080, "203.0.113.20", "203.0.113.21")),
		slices:  []*discovery.EndpointSlice{mixed("ready")},
		hairpin: []string{"10.180.0.1"},
		want: state{Chains: map[string][]string{
			svc: {masq, dnatTo("10.180.0.1")},
			ext: {"jump mark-for-masquerade", "goto " + svc},
		}, Elements: []string{
			"service-ips: 172.30.0.41 . tcp . 80 : goto " + svc,
			"service-ips: 203.0.113.10 . tcp . 80 : goto " + ext,
			"service-ips: 203.0.113.20 . tcp . 80 : goto " + ext,
			"service-nodeports: tcp . 30080 : goto " + ext,
		}},
	}, {
		name: "loadBalancerSourceRanges: a firewall chain for the load-balancer IPs",
		svc: service("svc1", "172.30.0.41", loadBalancer(30080, "203.0.113.20", "203.0.113.22", "203.0.113.21"), func(svc *v1.Service) {
			svc.Spec.LoadBalancerSourceRanges = []string{"192.168.0.0/16", " 10.0.0.0/8", "198.51.100.7/32", "2001:db8::/32"}
		}),
		slices:  []*discovery.EndpointSlice{mixed("ready")},
		hairpin: []string{"10.180.0.1"},
		want: state{Chains: map[string][]string{
			svc: {masq, dnatTo("10.180.0.1")},
			ext: {"jump mark-for-masquerade", "goto " + svc},
			"firewall-" + hashAndTruncate("ns1/svc1/tcp/p80"): {"ip saddr != { 10.0.0.0/8, 192.168.0.0/16, 198.51.100.7 } drop"},
		}, Elements: []string{
			"firewall-ips: 203.0.113.20 . tcp . 80 : goto firewall-" + hashAndTruncate("ns1/svc1/tcp/p80"),
			"firewall-ips: 203.0.113.22 . tcp . 80 : goto firewall-" + hashAndTruncate("ns1/svc1/tcp/p80"),
			"service-ips: 172.30.0.41 . tcp . 80 : goto " + svc,
			"service-ips: 203.0.113.20 . tcp . 80 : goto " + ext,
			"service-ips: 203.0.113.22 . tcp . 80 : goto " + ext,
			"service-nodeports: tcp . 30080 : goto " + ext,
		}},
	}, {
		name: "externalIPs without endpoints: rejected",
		svc:  service("svc1", "172.30.0.41", withExternalIPs("203.0.113.10")),
		want: state{Chains: map[string][]string{}, Elements: []string{
			"no-endpoint-services: 172.30.0.41 . tcp . 80 : goto reject-chain",
			"no-endpoint-services: 203.0.113.10 . tcp . 80 : goto reject-chain",
		}},
	}, {
		name: "zone hints: only the endpoints hinted for the node's zone",
		svc:  service("svc1", "172.30.0.41"),
		slices: []*discovery.EndpointSlice{hinted(mixed("ready", "ready", "ready"),
			map[string]string{"10.180.0.1": "zone-a", "10.180.0.2": "zone-b", "10.180.0.3": "zone-a"})},
		zone:    "zone-a",
		hairpin: []string{"10.180.0.1", "10.180.0.3"},
		want: state{Chains: map[string][]string{
			svc: {masq, dnatTo("10.180.0.1", "10.180.0.3")},
		}, Elements: []string{"service-ips: 172.30.0.41 . tcp . 80 : goto " + svc}},
	}, {
		name: "zone hints ignored when a ready endpoint has none",
		svc:  service("svc1", "172.30.0.41"),
		slices: []*discovery.EndpointSlice{hinted(mixed("ready", "ready", "ready"),
			map[string]string{"10.180.0.1": "zone-a", "10.180.0.2": "zone-b"})},
		zone:    "zone-a",
		hairpin: []string{"10.180.0.1", "10.180.0.2", "10.180.0.3"},
		want: state{Chains: map[string][]string{
			svc: {masq, dnatTo("10.180.0.1", "10.180.0.2", "10.180.0.3")},
		}, Elements: []string{"service-ips: 172.30.0.41 . tcp . 80 : goto " + svc}},
	}, {
		name: "zone hints ignored when none names the node's zone",
		svc:  service("svc1", "172.30.0.41"),
		slices: []*discovery.EndpointSlice{hinted(mixed("ready", "ready"),
			map[string]string{"10.180.0.1": "zone-a", "10.180.0.2": "zone-b"})},
		zone:    "zone-c",
		hairpin: []string{"10.180.0.1", "10.180.0.2"},
		want: state{Chains: map[string][]string{
			svc: {masq, dnatTo("10.180.0.1", "10.180.0.2")},
		}, Elements: []string{"service-ips: 172.30.0.41 . tcp . 80 : goto " + svc}},
	}, {
		name: "zone hints of unready endpoints do not count",
		svc:  service("svc1", "172.30.0.41"),
		slices: []*discovery.EndpointSlice{hinted(mixed("ready", "unready", "ready"),
			map[string]string{"10.180.0.1": "zone-a", "10.180.0.3": "zone-b"})},
		zone:    "zone-b",
		hairpin: []string{"10.180.0.3"},
		want: state{Chains: map[string][]string{
			svc: {masq, dnatTo("10.180.0.3")},
		}, Elements: []string{"service-ips: 172.30.0.41 . tcp . 80 : goto " + svc}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := newFakeNFT()
			p := New(fake, Config{ClusterCIDR: cidr, NodeName: thisNode})
			p.SetNodeLabels(map[string]string{v1.LabelTopologyZone: tt.zone})
			p.SetService(tt.svc)
			for _, s := range tt.slices {
				p.SetEndpointSlice(s)
			}
			mustSync(t, p)
			got := tableState(t, fake)
			tt.want.Elements = allElements(hairpin(tt.hairpin...), tt.want.Elements)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("table:\n got %#v\nwant %#v", got, tt.want)
			}
		})
	}
}

// TestNodeZoneChange: a new zone label recomputes the Services, and only
// those whose rules change are written.
func TestNodeZoneChange(t *testing.T) {
	fake := newFakeNFT()
	p := New(fake, Config{ClusterCIDR: cidr, NodeName: thisNode})
	p.SetNodeLabels(map[string]string{v1.LabelTopologyZone: "zone-a"})
	p.SetService(service("svc1", "172.30.0.41"))
	p.SetEndpointSlice(hinted(slice("svc1", "s1", ep{"10.180.0.1", "ready"}, ep{"10.180.0.2", "ready"}),
		map[string]string{"10.180.0.1": "zone-a", "10.180.0.2": "zone-b"}))
	p.SetService(service("plain", "172.30.0.42"))
	p.SetEndpointSlice(slice("plain", "p1", ep{"10.180.1.1", "ready"}))
	mustSync(t, p)
	chain := func() []string {
		return tableState(t, fake).Chains[svcChain("svc1")]
	}
	if got := chain(); got[len(got)-1] != dnatTo("10.180.0.1") {
		t.Fatalf("in zone-a: %v", got)
	}
	p.SetNodeLabels(map[string]string{v1.LabelTopologyZone: "zone-b"})
	fake.LastTransaction = nil
	res := mustSync(t, p)
	if got := chain(); got[len(got)-1] != dnatTo("10.180.0.2") {
		t.Errorf("in zone-b: %v", got)
	}
	if res.Services != 2 || fake.LastTransaction == nil {
		t.Fatalf("Sync after the zone changed: %+v", res)
	}
	if tx := fake.LastTransaction.String(); strings.Contains(tx, "ns1/plain/") {
		t.Errorf("the transaction touches the Service without hints:\n%s", tx)
	}
	// The same labels again: nothing to do.
	p.SetNodeLabels(map[string]string{v1.LabelTopologyZone: "zone-b", "other": "x"})
	if res := mustSync(t, p); res.Services != 0 {
		t.Errorf("unchanged zone recomputed %d Services", res.Services)
	}
}

// TestHealthChecks: the Services with externalTrafficPolicy Local and a
// healthCheckNodePort, with this node's ready endpoint addresses counted
// once across ports.
func TestHealthChecks(t *testing.T) {
	_, p := newFake(t)
	p.cfg.NodeName = thisNode
	lb := service("lb", "172.30.0.41", loadBalancer(30080, "203.0.113.20"), externalLocal)
	lb.Spec.HealthCheckNodePort = 30999
	lb.Spec.Ports = append(lb.Spec.Ports, v1.ServicePort{Name: "p81", Port: 81, Protocol: v1.ProtocolTCP, NodePort: 30081})
	p.SetService(lb)
	s := on(slice("lb", "l1", ep{"10.180.0.1", "ready"}, ep{"10.180.0.2", "ready"}, ep{"10.180.0.3", "terminating"}), thisNode, "10.180.0.1", "10.180.0.3")
	s.Ports = append(s.Ports, discovery.EndpointPort{Name: knftables.PtrTo("p81"), Port: knftables.PtrTo(int32(81)), Protocol: knftables.PtrTo(v1.ProtocolTCP)})
	p.SetEndpointSlice(s)
	p.SetService(service("cluster", "172.30.0.42", loadBalancer(30082, "203.0.113.21")))
	mustSync(t, p)
	want := map[types.NamespacedName]HealthCheck{{Namespace: "ns1", Name: "lb"}: {Port: 30999, LocalEndpoints: 1}}
	if got := p.HealthChecks(); !reflect.DeepEqual(got, want) {
		t.Errorf("HealthChecks = %v, want %v", got, want)
	}
	p.SetEndpointSlice(on(slice("lb", "l1", ep{"10.180.0.1", "unready"}, ep{"10.180.0.2", "ready"}), thisNode, "10.180.0.1"))
	mustSync(t, p)
	want[types.NamespacedName{Namespace: "ns1", Name: "lb"}] = HealthCheck{Port: 30999}
	if got := p.HealthChecks(); !reflect.DeepEqual(got, want) {
		t.Errorf("after the local endpoint went unready: %v, want %v", got, want)
	}
	p.DeleteService(types.NamespacedName{Namespace: "ns1", Name: "lb"})
	mustSync(t, p)
	if got := p.HealthChecks(); len(got) != 0 {
		t.Errorf("after the delete: %v", got)
	}
}
