package controlplane

import (
	"net/netip"
	"slices"
	"strconv"
	"testing"
)

func TestDesiredEndpoints(t *testing.T) {
	ap := netip.MustParseAddrPort
	tests := []struct {
		name       string
		live       map[netip.AddrPort]bool
		wantSubset []string // "ip,ip:port" per subset
		wantSlices []string // "name:port:ip,ip" per slice
	}{
		{"one apiserver", map[netip.AddrPort]bool{ap("10.0.0.1:6443"): true},
			[]string{"10.0.0.1:6443"}, []string{"kubernetes:6443:10.0.0.1"}},
		{"three on one port, sorted", map[netip.AddrPort]bool{ap("10.0.0.3:6443"): true, ap("10.0.0.1:6443"): true, ap("10.0.0.2:6443"): true},
			[]string{"10.0.0.1,10.0.0.2,10.0.0.3:6443"}, []string{"kubernetes:6443:10.0.0.1,10.0.0.2,10.0.0.3"}},
		{"two ports", map[netip.AddrPort]bool{ap("127.0.0.1:7000"): true, ap("127.0.0.1:6443"): true},
			[]string{"127.0.0.1:6443", "127.0.0.1:7000"}, []string{"kubernetes:6443:127.0.0.1", "kubernetes-7000:7000:127.0.0.1"}},
		{"none live", map[netip.AddrPort]bool{ap("10.0.0.1:6443"): false}, nil, []string{"kubernetes:6443:"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ep, want := desiredEndpoints(tt.live, 6443)
			var subsets []string
			for _, ss := range ep.Subsets {
				s := ""
				for i, a := range ss.Addresses {
					if i > 0 {
						s += ","
					}
					s += a.IP
				}
				subsets = append(subsets, s+":"+itoa(ss.Ports[0].Port))
			}
			if !slices.Equal(subsets, tt.wantSubset) || ep.Labels[labelSkipMirror] != "true" {
				t.Errorf("subsets %q, want %q (labels %v)", subsets, tt.wantSubset, ep.Labels)
			}
			var got []string
			for _, s := range want {
				v := s.Name + ":" + itoa(*s.Ports[0].Port) + ":"
				for i, e := range s.Endpoints {
					if i > 0 {
						v += ","
					}
					v += e.Addresses[0]
					if !*e.Conditions.Ready {
						t.Errorf("%s not ready", e.Addresses[0])
					}
				}
				if s.Labels["kubernetes.io/service-name"] != "kubernetes" || s.AddressType != "IPv4" || *s.Ports[0].Name != "https" {
					t.Errorf("slice %s: %+v", s.Name, s)
				}
				got = append(got, v)
			}
			if !slices.Equal(got, tt.wantSlices) {
				t.Errorf("slices %q, want %q", got, tt.wantSlices)
			}
		})
	}
}

func TestAdvertiseAddress(t *testing.T) {
	for _, tt := range []struct{ advertise, listen, want string }{
		{"", "127.0.0.1:6443", "127.0.0.1"},
		{"", "10.1.2.3:6443", "10.1.2.3"},
		{"192.0.2.7", "127.0.0.1:6443", "192.0.2.7"},
	} {
		got, err := AdvertiseAddress(tt.advertise, tt.listen)
		if err != nil || got.String() != tt.want {
			t.Errorf("AdvertiseAddress(%q, %q) = %v, %v; want %s", tt.advertise, tt.listen, got, err, tt.want)
		}
	}
	if got, err := AdvertiseAddress("", "0.0.0.0:6443"); err != nil || got.IsUnspecified() {
		t.Errorf("unspecified listen address: %v %v", got, err)
	}
	if _, err := AdvertiseAddress("not-an-ip", "127.0.0.1:6443"); err == nil {
		t.Error("a bad --advertise-address is accepted")
	}
}

func itoa(v int32) string { return strconv.Itoa(int(v)) }
