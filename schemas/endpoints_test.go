package schemas

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func newEndpoints(name string, ips ...string) *corev1.Endpoints {
	ss := corev1.EndpointSubset{Ports: []corev1.EndpointPort{{Name: "https", Port: 6443}}}
	for _, ip := range ips {
		ss.Addresses = append(ss.Addresses, corev1.EndpointAddress{IP: ip})
	}
	return &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Subsets: []corev1.EndpointSubset{ss}}
}

func newEndpointSlice(name string, ips ...string) *discoveryv1.EndpointSlice {
	port, pname := int32(6443), "https"
	eps := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{discoveryv1.LabelServiceName: name}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &pname, Port: &port}},
	}
	for _, ip := range ips {
		ready := true
		eps.Endpoints = append(eps.Endpoints, discoveryv1.Endpoint{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}})
	}
	return eps
}

func TestValidateEndpoints(t *testing.T) {
	res := mustLookup(t, testRegistry(), "", "endpoints")
	tests := []struct {
		name   string
		mutate func(*corev1.Endpoints)
		want   []string
	}{
		{"valid", func(*corev1.Endpoints) {}, nil},
		{"headless: no ports", func(e *corev1.Endpoints) { e.Subsets[0].Ports = nil }, nil},
		{"no addresses", func(e *corev1.Endpoints) { e.Subsets[0].Addresses = nil },
			[]string{"FieldValueRequired subsets[0]: must specify `addresses` or `notReadyAddresses`"}},
		{"bad IP", func(e *corev1.Endpoints) { e.Subsets[0].Addresses[0].IP = "10.0.0.300" },
			[]string{"FieldValueInvalid subsets[0].addresses[0].ip: must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"}},
		{"loopback", func(e *corev1.Endpoints) {
			e.Subsets[0].NotReadyAddresses = []corev1.EndpointAddress{{IP: "127.0.0.1"}}
		},
			[]string{"FieldValueInvalid subsets[0].notReadyAddresses[0].ip: may not be in the loopback range (127.0.0.0/8, ::1/128)"}},
		{"port", func(e *corev1.Endpoints) { e.Subsets[0].Ports[0].Port = 0 },
			[]string{"FieldValueInvalid subsets[0].ports[0].port: must be between 1 and 65535, inclusive"}},
		{"names with two ports", func(e *corev1.Endpoints) {
			e.Subsets[0].Ports = append(e.Subsets[0].Ports, corev1.EndpointPort{Port: 80})
		}, []string{"FieldValueRequired subsets[0].ports[1].name: "}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantCreateErrors(t, res, newEndpoints("web", "10.1.0.5"), tt.mutate, tt.want)
		})
	}
	e := newEndpoints("web", "10.1.0.5")
	res.Default(e)
	if e.Subsets[0].Ports[0].Protocol != corev1.ProtocolTCP {
		t.Errorf("protocol default %q", e.Subsets[0].Ports[0].Protocol)
	}
}

func TestValidateEndpointSlice(t *testing.T) {
	res := mustLookup(t, testRegistry(), "discovery.k8s.io", "endpointslices")
	tests := []struct {
		name   string
		mutate func(*discoveryv1.EndpointSlice)
		want   []string
	}{
		{"valid", func(*discoveryv1.EndpointSlice) {}, nil},
		{"no address type", func(e *discoveryv1.EndpointSlice) { e.AddressType = "" }, []string{"FieldValueRequired addressType: "}},
		{"address type", func(e *discoveryv1.EndpointSlice) { e.AddressType = "IP" },
			[]string{`FieldValueNotSupported addressType: supported values: "FQDN", "IPv4", "IPv6"`}},
		{"IPv6 in an IPv4 slice", func(e *discoveryv1.EndpointSlice) { e.Endpoints[0].Addresses[0] = "fd00::5" },
			[]string{"FieldValueInvalid endpoints[0].addresses[0]: must be an IPv4 address"}},
		{"no addresses", func(e *discoveryv1.EndpointSlice) { e.Endpoints[0].Addresses = nil },
			[]string{"FieldValueRequired endpoints[0].addresses: must contain at least 1 address"}},
		{"duplicate port names", func(e *discoveryv1.EndpointSlice) { e.Ports = append(e.Ports, e.Ports[0]) },
			[]string{`FieldValueDuplicate ports[1].name: `}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantCreateErrors(t, res, newEndpointSlice("web", "10.1.0.5"), tt.mutate, tt.want)
		})
	}

	t.Run("address type is immutable, generation counts changes", func(t *testing.T) {
		old := created(res, newEndpointSlice("web", "10.1.0.5"))
		if old.Generation != 1 || *old.Ports[0].Protocol != corev1.ProtocolTCP {
			t.Fatalf("created: generation %d, protocol %v", old.Generation, old.Ports[0].Protocol)
		}
		same := old.DeepCopy()
		same.Annotations = map[string]string{"a": "b"}
		res.PrepareForUpdate(same, old)
		if same.Generation != 1 {
			t.Errorf("an annotation is not a change: generation %d", same.Generation)
		}
		moved := old.DeepCopy()
		moved.Endpoints[0].Addresses[0] = "10.1.0.6"
		res.PrepareForUpdate(moved, old)
		if moved.Generation != 2 {
			t.Errorf("new address: generation %d", moved.Generation)
		}
		v6 := old.DeepCopy()
		v6.AddressType, v6.Endpoints = discoveryv1.AddressTypeIPv6, nil
		res.PrepareForUpdate(v6, old)
		wantDetails(t, res.ValidateUpdate(v6, old), []string{`FieldValueInvalid addressType: field is immutable`})
	})
}

func TestEndpointTables(t *testing.T) {
	reg := testRegistry()
	ep := newEndpoints("kubernetes", "10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4")
	ep.CreationTimestamp = ago(90 * time.Second)
	want := []any{"kubernetes", "10.0.0.1:6443,10.0.0.2:6443,10.0.0.3:6443 + 1 more...", "90s"}
	if row := mustLookup(t, reg, "", "endpoints").Table.Row(ep); !slices.Equal(row, want) {
		t.Errorf("endpoints row %#v", row)
	}
	if row := mustLookup(t, reg, "", "endpoints").Table.Row(&corev1.Endpoints{ObjectMeta: ep.ObjectMeta}); row[1] != "<none>" {
		t.Errorf("empty endpoints: %v", row)
	}
	eps := newEndpointSlice("kubernetes", "10.0.0.1", "10.0.0.2")
	eps.CreationTimestamp = ago(90 * time.Second)
	want = []any{"kubernetes", "IPv4", "6443", "10.0.0.1,10.0.0.2", "90s"}
	res := mustLookup(t, reg, "discovery.k8s.io", "endpointslices")
	if row := res.Table.Row(eps); !slices.Equal(row, want) {
		t.Errorf("endpointslice row %#v", row)
	}
	eps.Ports, eps.Endpoints = nil, nil
	if row := res.Table.Row(eps); row[2] != "<unset>" || row[3] != "<unset>" {
		t.Errorf("empty slice: %v", row)
	}
}
