package proxy

import (
	"context"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/knftables"
)

const cidr = "10.244.0.0/16"

// Chain names as kube-proxy computes them (its proxier_test.go has these).
const (
	svc1Chain = "service-ULMVA6XW-ns1/svc1/tcp/p80"
	svc1Ep1   = "endpoint-5OJB2KTY-ns1/svc1/tcp/p80__10.180.0.1/80"
)

func service(name, ip string, mutate ...func(*v1.Service)) *v1.Service {
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: name},
		Spec: v1.ServiceSpec{
			Type:      v1.ServiceTypeClusterIP,
			ClusterIP: ip,
			Ports:     []v1.ServicePort{{Name: "p80", Port: 80, Protocol: v1.ProtocolTCP}},
		},
	}
	for _, m := range mutate {
		m(svc)
	}
	return svc
}

func nodePort(port int32) func(*v1.Service) {
	return func(svc *v1.Service) {
		svc.Spec.Type = v1.ServiceTypeNodePort
		svc.Spec.Ports[0].NodePort = port
	}
}

func clientIP(svc *v1.Service) { svc.Spec.SessionAffinity = v1.ServiceAffinityClientIP }

// ep is an endpoint with its conditions: "ready", "unready",
// "terminating" (serving and terminating) or "gone" (neither).
type ep struct{ ip, state string }

func slice(svcName, name string, eps ...ep) *discovery.EndpointSlice {
	s := &discovery.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "ns1", Name: name,
			Labels: map[string]string{discovery.LabelServiceName: svcName},
		},
		AddressType: discovery.AddressTypeIPv4,
		Ports:       []discovery.EndpointPort{{Name: knftables.PtrTo("p80"), Port: knftables.PtrTo(int32(80)), Protocol: knftables.PtrTo(v1.ProtocolTCP)}},
	}
	for _, e := range eps {
		c := discovery.EndpointConditions{
			Ready:       knftables.PtrTo(e.state == "ready"),
			Serving:     knftables.PtrTo(e.state == "ready" || e.state == "terminating"),
			Terminating: knftables.PtrTo(e.state == "terminating" || e.state == "gone"),
		}
		s.Endpoints = append(s.Endpoints, discovery.Endpoint{Addresses: []string{e.ip}, Conditions: c})
	}
	return s
}

// state is the part of the table that depends on Services: chains other
// than the fixed ones with their rules, the maps' elements ("map: key :
// value") and the sets.
type state struct {
	Chains   map[string][]string
	Elements []string
	Sets     []string
}

// tableState is the state of every proxy table of fake together.
func tableState(t *testing.T, fake *fakeNFT) state {
	t.Helper()
	st := state{Chains: map[string][]string{}}
	for _, name := range fake.tableNames() {
		fake.addState(&st, name)
	}
	sort.Strings(st.Elements)
	sort.Strings(st.Sets)
	return st
}

func newFake(t *testing.T) (*fakeNFT, *Proxier) {
	fake := newFakeNFT()
	return fake, New(fake, Config{ClusterCIDR: cidr})
}

func mustSync(t *testing.T, p *Proxier) SyncResult {
	t.Helper()
	res, err := p.Sync(context.Background())
	if err != nil {
		t.Fatalf("Sync: %v", err)
	}
	return res
}

func epChain(svc, ip string) string {
	return "endpoint-" + hashAndTruncate("ns1/"+svc+"/tcp/p80__"+ip+"/80")
}

func svcChain(svc string) string { return "service-" + hashAndTruncate("ns1/"+svc+"/tcp/p80") }

// dnatTo is the rule that DNATs to one of the endpoints (port 80).
func dnatTo(ips ...string) string {
	s := "meta l4proto tcp dnat ip to numgen random mod " + strconv.Itoa(len(ips)) + " map { "
	for i, ip := range ips {
		if i > 0 {
			s += ", "
		}
		s += strconv.Itoa(i) + " : " + ip + " . 80"
	}
	return s + " }"
}

// hairpin are the hairpin set's elements for the endpoint addresses.
func hairpin(ips ...string) []string {
	var out []string
	for _, ip := range ips {
		out = append(out, "hairpin: "+ip+" . "+ip)
	}
	return out
}

// allElements are the map and set elements of a state, sorted as tableState
// sorts them.
func allElements(groups ...[]string) []string {
	var out []string
	for _, g := range groups {
		out = append(out, g...)
	}
	sort.Strings(out)
	return out
}

func TestRules(t *testing.T) {
	masq := "ip daddr 172.30.0.41 tcp dport 80 ip saddr != " + cidr + " jump mark-for-masquerade"
	ep1, ep2 := epChain("svc1", "10.180.0.1"), epChain("svc1", "10.180.0.2")
	aff1 := "affinity-5OJB2KTY-ns1/svc1/tcp/p80__10.180.0.1/80"
	aff2 := "affinity-" + hashAndTruncate("ns1/svc1/tcp/p80__10.180.0.2/80")
	tests := []struct {
		name   string
		svc    *v1.Service
		slices []*discovery.EndpointSlice
		want   state
	}{{
		name: "ClusterIP without endpoints is rejected",
		svc:  service("svc1", "172.30.0.41"),
		want: state{Chains: map[string][]string{}, Elements: []string{
			"no-endpoint-services: 172.30.0.41 . tcp . 80 : goto reject-chain",
		}},
	}, {
		name:   "ClusterIP with one endpoint",
		svc:    service("svc1", "172.30.0.41"),
		slices: []*discovery.EndpointSlice{slice("svc1", "s1", ep{"10.180.0.1", "ready"})},
		want: state{Chains: map[string][]string{
			svc1Chain: {masq, dnatTo("10.180.0.1")},
		}, Elements: allElements(hairpin("10.180.0.1"), []string{"service-ips: 172.30.0.41 . tcp . 80 : goto " + svc1Chain})},
	}, {
		name: "ClusterIP with three endpoints in two slices, one unready",
		svc:  service("svc1", "172.30.0.41"),
		slices: []*discovery.EndpointSlice{
			slice("svc1", "s1", ep{"10.180.0.3", "ready"}, ep{"10.180.0.1", "ready"}),
			slice("svc1", "s2", ep{"10.180.0.2", "ready"}, ep{"10.180.0.9", "unready"}, ep{"10.180.0.8", "terminating"}),
		},
		want: state{Chains: map[string][]string{
			svc1Chain: {masq, dnatTo("10.180.0.1", "10.180.0.2", "10.180.0.3")},
		}, Elements: allElements(hairpin("10.180.0.1", "10.180.0.2", "10.180.0.3"), []string{"service-ips: 172.30.0.41 . tcp . 80 : goto " + svc1Chain})},
	}, {
		name: "none ready: serving terminating endpoints are used",
		svc:  service("svc1", "172.30.0.41"),
		slices: []*discovery.EndpointSlice{slice("svc1", "s1",
			ep{"10.180.0.1", "terminating"}, ep{"10.180.0.2", "gone"}, ep{"10.180.0.3", "unready"})},
		want: state{Chains: map[string][]string{
			svc1Chain: {masq, dnatTo("10.180.0.1")},
		}, Elements: allElements(hairpin("10.180.0.1"), []string{"service-ips: 172.30.0.41 . tcp . 80 : goto " + svc1Chain})},
	}, {
		name:   "only unready endpoints: rejected",
		svc:    service("svc1", "172.30.0.41"),
		slices: []*discovery.EndpointSlice{slice("svc1", "s1", ep{"10.180.0.1", "unready"}, ep{"10.180.0.2", "gone"})},
		want: state{Chains: map[string][]string{}, Elements: []string{
			"no-endpoint-services: 172.30.0.41 . tcp . 80 : goto reject-chain",
		}},
	}, {
		name:   "NodePort",
		svc:    service("svc1", "172.30.0.41", nodePort(30080)),
		slices: []*discovery.EndpointSlice{slice("svc1", "s1", ep{"10.180.0.1", "ready"})},
		want: state{Chains: map[string][]string{
			svc1Chain:                            {masq, dnatTo("10.180.0.1")},
			"external-ULMVA6XW-ns1/svc1/tcp/p80": {"jump mark-for-masquerade", "goto " + svc1Chain},
		}, Elements: allElements(hairpin("10.180.0.1"), []string{
			"service-ips: 172.30.0.41 . tcp . 80 : goto " + svc1Chain,
			"service-nodeports: tcp . 30080 : goto external-ULMVA6XW-ns1/svc1/tcp/p80",
		})},
	}, {
		name: "NodePort without endpoints is rejected on both",
		svc:  service("svc1", "172.30.0.41", nodePort(30080)),
		want: state{Chains: map[string][]string{}, Elements: []string{
			"no-endpoint-nodeports: tcp . 30080 : goto reject-chain",
			"no-endpoint-services: 172.30.0.41 . tcp . 80 : goto reject-chain",
		}},
	}, {
		name:   "session affinity ClientIP: a set and a chain per endpoint",
		svc:    service("svc1", "172.30.0.41", clientIP),
		slices: []*discovery.EndpointSlice{slice("svc1", "s1", ep{"10.180.0.1", "ready"}, ep{"10.180.0.2", "ready"})},
		want: state{Chains: map[string][]string{
			svc1Chain: {masq,
				"ip saddr @" + aff1 + " goto " + ep1,
				"ip saddr @" + aff2 + " goto " + ep2,
				"numgen random mod 2 vmap { 0 : goto " + ep1 + " , 1 : goto " + ep2 + " }"},
			ep1: {"update @" + aff1 + " { ip saddr }", "meta l4proto tcp dnat to 10.180.0.1:80"},
			ep2: {"update @" + aff2 + " { ip saddr }", "meta l4proto tcp dnat to 10.180.0.2:80"},
		}, Elements: allElements(hairpin("10.180.0.1", "10.180.0.2"), []string{"service-ips: 172.30.0.41 . tcp . 80 : goto " + svc1Chain}),
			Sets: []string{aff2, aff1}}, // sorted
	}, {
		name:   "headless: nothing",
		svc:    service("svc1", v1.ClusterIPNone),
		slices: []*discovery.EndpointSlice{slice("svc1", "s1", ep{"10.180.0.1", "ready"})},
		want:   state{Chains: map[string][]string{}},
	}, {
		name:   "slice of another Service is not used",
		svc:    service("svc1", "172.30.0.41"),
		slices: []*discovery.EndpointSlice{slice("svc2", "s1", ep{"10.180.0.1", "ready"})},
		want: state{Chains: map[string][]string{}, Elements: []string{
			"no-endpoint-services: 172.30.0.41 . tcp . 80 : goto reject-chain",
		}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake, p := newFake(t)
			p.SetService(tt.svc)
			for _, s := range tt.slices {
				p.SetEndpointSlice(s)
			}
			if res := mustSync(t, p); !res.Full {
				t.Errorf("first Sync: Full = false, want true")
			}
			if got := tableState(t, fake); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("table:\n got %#v\nwant %#v", got, tt.want)
			}
		})
	}
}

// TestUpdates drives one Proxier through a Service's life next to another
// Service, checking the table and that each transaction names only the
// Service that changed.
func TestUpdates(t *testing.T) {
	fake, p := newFake(t)
	other := service("other", "172.30.0.50")
	p.SetService(other)
	p.SetEndpointSlice(slice("other", "o1", ep{"10.180.1.1", "ready"}))
	otherState := state{Chains: map[string][]string{
		svcChain("other"): {"ip daddr 172.30.0.50 tcp dport 80 ip saddr != " + cidr + " jump mark-for-masquerade",
			dnatTo("10.180.1.1")},
	}, Elements: allElements(hairpin("10.180.1.1"), []string{"service-ips: 172.30.0.50 . tcp . 80 : goto " + svcChain("other")})}
	mustSync(t, p)

	masq := "ip daddr 172.30.0.41 tcp dport 80 ip saddr != " + cidr + " jump mark-for-masquerade"
	steps := []struct {
		name    string
		change  func()
		wantOps int
		want    state // svc1's part; other's is added
	}{{
		name: "added with two endpoints",
		change: func() {
			p.SetService(service("svc1", "172.30.0.41"))
			p.SetEndpointSlice(slice("svc1", "s1", ep{"10.180.0.1", "ready"}, ep{"10.180.0.2", "ready"}))
		},
		// 1 chain (add, flush), 2 rules, the element, 2 hairpin elements.
		wantOps: 7,
		want: state{Chains: map[string][]string{
			svc1Chain: {masq, dnatTo("10.180.0.1", "10.180.0.2")},
		}, Elements: allElements(hairpin("10.180.0.1", "10.180.0.2"), []string{"service-ips: 172.30.0.41 . tcp . 80 : goto " + svc1Chain})},
	}, {
		name: "an endpoint goes unready",
		change: func() {
			p.SetEndpointSlice(slice("svc1", "s1", ep{"10.180.0.1", "ready"}, ep{"10.180.0.2", "unready"}))
		},
		// Service chain rewritten (add, flush, 2 rules), ep2's hairpin
		// element deleted; the map element is unchanged.
		wantOps: 5,
		want: state{Chains: map[string][]string{
			svc1Chain: {masq, dnatTo("10.180.0.1")},
		}, Elements: allElements(hairpin("10.180.0.1"), []string{"service-ips: 172.30.0.41 . tcp . 80 : goto " + svc1Chain})},
	}, {
		name:   "the last endpoint goes unready: rejected",
		change: func() { p.SetEndpointSlice(slice("svc1", "s1", ep{"10.180.0.1", "unready"})) },
		// Element deleted, reject element added, the chain flushed and
		// deleted, the hairpin element deleted.
		wantOps: 5,
		want: state{Chains: map[string][]string{}, Elements: []string{
			"no-endpoint-services: 172.30.0.41 . tcp . 80 : goto reject-chain",
		}},
	}, {
		name:   "ready again",
		change: func() { p.SetEndpointSlice(slice("svc1", "s1", ep{"10.180.0.1", "ready"})) },
		// Reject element deleted, the chain written (add, flush, 2
		// rules), element and hairpin element added.
		wantOps: 7,
		want: state{Chains: map[string][]string{
			svc1Chain: {masq, dnatTo("10.180.0.1")},
		}, Elements: allElements(hairpin("10.180.0.1"), []string{"service-ips: 172.30.0.41 . tcp . 80 : goto " + svc1Chain})},
	}, {
		name:    "resynced with no change: nothing to do",
		change:  func() { p.SetService(service("svc1", "172.30.0.41")) },
		wantOps: 0,
		want: state{Chains: map[string][]string{
			svc1Chain: {masq, dnatTo("10.180.0.1")},
		}, Elements: allElements(hairpin("10.180.0.1"), []string{"service-ips: 172.30.0.41 . tcp . 80 : goto " + svc1Chain})},
	}, {
		name:    "deleted: its chains and elements are gone",
		change:  func() { p.DeleteService(types.NamespacedName{Namespace: "ns1", Name: "svc1"}) },
		wantOps: 4, // element deleted, the chain flushed and deleted, the hairpin element deleted
		want:    state{Chains: map[string][]string{}},
	}}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			st.change()
			fake.LastTransaction = nil
			res := mustSync(t, p)
			if res.Full {
				t.Errorf("Full = true, want an incremental Sync")
			}
			if res.Ops != st.wantOps {
				t.Errorf("Ops = %d, want %d\n%v", res.Ops, st.wantOps, fake.LastTransaction)
			}
			if tx := fake.LastTransaction; tx != nil && strings.Contains(tx.String(), "other") {
				t.Errorf("transaction touches the unchanged Service:\n%v", tx)
			}
			want := state{Chains: map[string][]string{}, Sets: st.want.Sets}
			for k, v := range otherState.Chains {
				want.Chains[k] = v
			}
			for k, v := range st.want.Chains {
				want.Chains[k] = v
			}
			want.Elements = append(append([]string{}, otherState.Elements...), st.want.Elements...)
			sort.Strings(want.Elements)
			if got := tableState(t, fake); !reflect.DeepEqual(got, want) {
				t.Errorf("table:\n got %#v\nwant %#v", got, want)
			}
		})
	}
}

// TestRestart: a new Proxier on a table a previous one programmed takes it
// over in its first (full) Sync: the Services still there keep their rules,
// those deleted meanwhile lose theirs, affinity sets included.
func TestRestart(t *testing.T) {
	fake, p := newFake(t)
	p.SetService(service("svc1", "172.30.0.41"))
	p.SetService(service("gone", "172.30.0.42", clientIP))
	p.SetEndpointSlice(slice("svc1", "s1", ep{"10.180.0.1", "ready"}))
	p.SetEndpointSlice(slice("gone", "g1", ep{"10.180.0.5", "ready"}))
	mustSync(t, p)

	p2 := New(fake, Config{ClusterCIDR: cidr})
	p2.SetService(service("svc1", "172.30.0.41"))
	p2.SetEndpointSlice(slice("svc1", "s1", ep{"10.180.0.1", "ready"}))
	if res := mustSync(t, p2); !res.Full {
		t.Errorf("first Sync after restart: Full = false")
	}
	want := state{Chains: map[string][]string{
		svc1Chain: {"ip daddr 172.30.0.41 tcp dport 80 ip saddr != " + cidr + " jump mark-for-masquerade", dnatTo("10.180.0.1")},
	}, Elements: allElements(hairpin("10.180.0.1"), []string{"service-ips: 172.30.0.41 . tcp . 80 : goto " + svc1Chain})}
	if got := tableState(t, fake); !reflect.DeepEqual(got, want) {
		t.Errorf("table:\n got %#v\nwant %#v", got, want)
	}
	// A second full Sync of the same state changes nothing visible.
	p2.Resync()
	mustSync(t, p2)
	if got := tableState(t, fake); !reflect.DeepEqual(got, want) {
		t.Errorf("table after Resync:\n got %#v\nwant %#v", got, want)
	}
}
