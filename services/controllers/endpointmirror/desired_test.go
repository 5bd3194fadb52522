package endpointmirror

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func addrs(ips ...string) []corev1.EndpointAddress {
	var out []corev1.EndpointAddress
	for _, ip := range ips {
		out = append(out, corev1.EndpointAddress{IP: ip})
	}
	return out
}

func epPorts(ports ...int32) []corev1.EndpointPort {
	var out []corev1.EndpointPort
	for _, p := range ports {
		out = append(out, corev1.EndpointPort{Name: fmt.Sprintf("p%d", p), Port: p, Protocol: corev1.ProtocolTCP})
	}
	return out
}

// describe is one line per slice, sorted: name (or generateName+"*"),
// address type, ports, then address:r or address:- per endpoint.
func describe(p plan) []string {
	var out []string
	line := func(verb string, es *discoveryv1.EndpointSlice) {
		name := es.Name
		if name == "" {
			name = es.GenerateName + "*"
		}
		var ports, eps []string
		for _, p := range es.Ports {
			ports = append(ports, fmt.Sprint(*p.Port))
		}
		for _, e := range es.Endpoints {
			eps = append(eps, e.Addresses[0]+":"+map[bool]string{true: "r", false: "-"}[*e.Conditions.Ready])
		}
		out = append(out, fmt.Sprintf("%s %s %s [%s] %s", verb, name, es.AddressType, strings.Join(ports, ","), strings.Join(eps, " ")))
	}
	for _, es := range p.create {
		line("create", es)
	}
	for _, es := range p.update {
		line("update", es)
	}
	for _, es := range p.remove {
		out = append(out, "delete "+es.Name)
	}
	slices.Sort(out)
	return out
}

// TestPlan: kube's reconciler cases, one Endpoints object against the
// slices mirrored so far.
func TestPlan(t *testing.T) {
	ep := func(subsets ...corev1.EndpointSubset) *corev1.Endpoints {
		return &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "ext", UID: "u1",
			Labels:      map[string]string{"team": "a", discoveryv1.LabelManagedBy: "someone"},
			Annotations: map[string]string{corev1.EndpointsLastChangeTriggerTime: "x", "note": "kept"}}, Subsets: subsets}
	}
	// mirrored is what the controller would have written for e, named.
	mirrored := func(e *corev1.Endpoints, names ...string) []*discoveryv1.EndpointSlice {
		p := planFor(e, nil, desiredOf(e, 1000), 1000)
		for i, es := range p.create {
			es.Name, es.GenerateName = names[i], ""
		}
		return p.create
	}
	one := ep(corev1.EndpointSubset{Addresses: addrs("10.0.0.1", "10.0.0.2"), NotReadyAddresses: addrs("10.0.0.3"), Ports: epPorts(80)})
	tests := []struct {
		name     string
		ep       *corev1.Endpoints
		existing []*discoveryv1.EndpointSlice
		max      int
		want     []string
		invalid  int
		skipped  int
	}{
		{name: "new", ep: one, want: []string{"create ext-* IPv4 [80] 10.0.0.1:r 10.0.0.2:r 10.0.0.3:-"}},
		{name: "unchanged", ep: one, existing: mirrored(one, "ext-a")},
		{name: "address added", ep: ep(corev1.EndpointSubset{Addresses: addrs("10.0.0.1", "10.0.0.2", "10.0.0.4"), NotReadyAddresses: addrs("10.0.0.3"), Ports: epPorts(80)}),
			existing: mirrored(one, "ext-a"), want: []string{"update ext-a IPv4 [80] 10.0.0.1:r 10.0.0.2:r 10.0.0.3:- 10.0.0.4:r"}},
		{name: "readiness changed", ep: ep(corev1.EndpointSubset{Addresses: addrs("10.0.0.1", "10.0.0.2", "10.0.0.3"), Ports: epPorts(80)}),
			existing: mirrored(one, "ext-a"), want: []string{"update ext-a IPv4 [80] 10.0.0.1:r 10.0.0.2:r 10.0.0.3:r"}},
		{name: "ports changed: the old slice is reused", ep: ep(corev1.EndpointSubset{Addresses: addrs("10.0.0.1"), Ports: epPorts(8080)}),
			existing: mirrored(one, "ext-a"), want: []string{"update ext-a IPv4 [8080] 10.0.0.1:r"}},
		{name: "no addresses", ep: ep(corev1.EndpointSubset{Ports: epPorts(80)}), existing: mirrored(one, "ext-a"), want: []string{"delete ext-a"}},
		{name: "no subsets", ep: ep(), existing: mirrored(one, "ext-a"), want: []string{"delete ext-a"}},
		{name: "a duplicate slice is deleted", ep: one, existing: append(mirrored(one, "ext-a"), mirrored(one, "ext-b")...), want: []string{"delete ext-b"}},
		{name: "two subsets, two families", ep: ep(
			corev1.EndpointSubset{Addresses: addrs("10.0.0.1", "fd00::1"), Ports: epPorts(80)},
			corev1.EndpointSubset{Addresses: addrs("10.0.0.2"), Ports: epPorts(443, 80)}),
			want: []string{"create ext-* IPv4 [80,443] 10.0.0.2:r", "create ext-* IPv4 [80] 10.0.0.1:r", "create ext-* IPv6 [80] fd00::1:r"}},
		{name: "subsets with the same ports share a slice", ep: ep(
			corev1.EndpointSubset{Addresses: addrs("10.0.0.1"), Ports: epPorts(80)},
			corev1.EndpointSubset{Addresses: addrs("10.0.0.2"), Ports: epPorts(80)}),
			want: []string{"create ext-* IPv4 [80] 10.0.0.1:r 10.0.0.2:r"}},
		{name: "invalid and irregular addresses", ep: ep(corev1.EndpointSubset{Addresses: addrs("10.0.0.1", "not-an-ip", "::ffff:10.0.0.9", "fd00:0::1"), Ports: epPorts(80)}),
			want: []string{"create ext-* IPv4 [80] 10.0.0.1:r 10.0.0.9:r", "create ext-* IPv6 [80] fd00::1:r"}, invalid: 1, skipped: 1},
		{name: "over the limit", max: 2, ep: one, want: []string{"create ext-* IPv4 [80] 10.0.0.1:r 10.0.0.2:r"}, skipped: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			max := tt.max
			if max == 0 {
				max = 1000
			}
			d := desiredOf(tt.ep, max)
			p := planFor(tt.ep, tt.existing, d, max)
			if got := describe(p); !slices.Equal(got, tt.want) {
				t.Errorf("plan:\n got %q\nwant %q", got, tt.want)
			}
			if d.invalid != tt.invalid || d.skipped != tt.skipped {
				t.Errorf("invalid %d skipped %d, want %d %d", d.invalid, d.skipped, tt.invalid, tt.skipped)
			}
			for _, es := range append(p.create, p.update...) {
				if es.Labels[discoveryv1.LabelManagedBy] != ManagedBy || es.Labels[discoveryv1.LabelServiceName] != "ext" || es.Labels["team"] != "a" {
					t.Errorf("labels %v", es.Labels)
				}
				if _, ok := es.Annotations[corev1.EndpointsLastChangeTriggerTime]; ok || es.Annotations["note"] != "kept" {
					t.Errorf("annotations %v", es.Annotations)
				}
				if len(es.OwnerReferences) != 1 || es.OwnerReferences[0].Kind != "Endpoints" || es.OwnerReferences[0].UID != "u1" || !*es.OwnerReferences[0].Controller {
					t.Errorf("owner references %v", es.OwnerReferences)
				}
			}
		})
	}
}
