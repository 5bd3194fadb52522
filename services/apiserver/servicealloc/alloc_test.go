package servicealloc

import (
	"errors"
	"net/netip"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cairn-dev/cairn/services/apiserver/storage"
)

func TestIPRange(t *testing.T) {
	tests := []struct {
		cidr        string
		size, band  int
		first, last string
	}{
		{"10.96.0.0/12", 1<<20 - 2, 256, "10.96.0.1", "10.111.255.254"},
		{"10.0.0.0/24", 254, 16, "10.0.0.1", "10.0.0.254"},
		{"10.0.0.0/29", 6, 0, "10.0.0.1", "10.0.0.6"},
		{"10.0.0.8/31", 2, 0, "10.0.0.8", "10.0.0.9"},
		{"10.0.0.7/32", 1, 0, "10.0.0.7", "10.0.0.7"},
		{"10.0.1.77/24", 254, 16, "10.0.1.1", "10.0.1.254"}, // masked
	}
	for _, tt := range tests {
		t.Run(tt.cidr, func(t *testing.T) {
			r, err := ParseIPRange(tt.cidr)
			if err != nil {
				t.Fatal(err)
			}
			if r.Size() != tt.size || r.staticBand() != tt.band {
				t.Errorf("size %d band %d, want %d %d", r.Size(), r.staticBand(), tt.size, tt.band)
			}
			if r.At(0).String() != tt.first || r.At(r.Size()-1).String() != tt.last {
				t.Errorf("first %v last %v", r.At(0), r.At(r.Size()-1))
			}
			for _, i := range []int{0, r.Size() / 2, r.Size() - 1} {
				if off, ok := r.Offset(r.At(i)); !ok || off != i {
					t.Errorf("Offset(At(%d)) = %d, %v", i, off, ok)
				}
			}
		})
	}
	r := MustParseIPRange("10.96.0.0/12")
	for _, s := range []string{"10.96.0.0", "10.111.255.255", "10.112.0.1", "192.168.0.1", "fd00::1"} {
		if _, ok := r.Offset(netip.MustParseAddr(s)); ok {
			t.Errorf("%s is not allocatable in %v", s, r)
		}
	}
	for _, bad := range []string{"10.96.0.0", "fd00::/108", "10.0.0.0/7"} {
		if _, err := ParseIPRange(bad); err == nil {
			t.Errorf("ParseIPRange(%q) succeeded", bad)
		}
	}
}

func TestPortRange(t *testing.T) {
	r, err := ParsePortRange("30000-32767")
	if err != nil || r.Base != 30000 || r.Size != 2768 || r.String() != "30000-32767" {
		t.Fatalf("%+v %v", r, err)
	}
	if !r.Contains(30000) || !r.Contains(32767) || r.Contains(29999) || r.Contains(32768) {
		t.Error("Contains")
	}
	if one, err := ParsePortRange("8080"); err != nil || one.Size != 1 {
		t.Errorf("single port: %+v %v", one, err)
	}
	for _, bad := range []string{"", "a-b", "0-10", "10-5", "1-65536"} {
		if _, err := ParsePortRange(bad); err == nil {
			t.Errorf("ParsePortRange(%q) succeeded", bad)
		}
	}
}

// TestPick: every free offset is found, whatever the random start, and a
// full range says so.
func TestPick(t *testing.T) {
	for range 50 {
		off, ok := pick(10, 20, func(o int) bool { return o != 17 })
		if !ok || off != 17 {
			t.Fatalf("pick = %d, %v, want the one free offset 17", off, ok)
		}
	}
	if _, ok := pick(0, 5, func(int) bool { return true }); ok {
		t.Error("pick in a full range succeeded")
	}
	if _, ok := pick(3, 3, func(int) bool { return false }); ok {
		t.Error("pick in an empty range succeeded")
	}
}

func svcOf(typ corev1.ServiceType, ports ...corev1.ServicePort) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "u1"},
		Spec:       corev1.ServiceSpec{Type: typ, Ports: ports},
	}
}

func claimKeys(as *Assignment) []string {
	var keys []string
	for _, c := range as.Extra.Claims {
		keys = append(keys, c.Key)
	}
	return keys
}

func TestAssign(t *testing.T) {
	a := New(nil, MustParseIPRange("10.96.0.0/12"), MustParsePortRange("30000-32767"))

	t.Run("random cluster IP from the upper range", func(t *testing.T) {
		for range 20 {
			svc := svcOf(corev1.ServiceTypeClusterIP, corev1.ServicePort{Port: 80})
			as, err := a.Assign(svc, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			off, ok := a.IPs.Offset(netip.MustParseAddr(svc.Spec.ClusterIP))
			if !ok || off < 256 || !slices.Equal(svc.Spec.ClusterIPs, []string{svc.Spec.ClusterIP}) {
				t.Fatalf("cluster IP %q (offset %d)", svc.Spec.ClusterIP, off)
			}
			if keys := claimKeys(as); !slices.Equal(keys, []string{IPPrefix + svc.Spec.ClusterIP}) || len(as.requested) != 0 {
				t.Errorf("claims %v requested %v", keys, as.requested)
			}
		}
	})
	t.Run("requested cluster IP", func(t *testing.T) {
		svc := svcOf(corev1.ServiceTypeClusterIP)
		svc.Spec.ClusterIP, svc.Spec.ClusterIPs = "10.96.0.10", []string{"10.96.0.10"}
		as, err := a.Assign(svc, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		errs := as.Refused(&storage.ClaimError{Taken: []string{IPPrefix + "10.96.0.10"}})
		if len(errs) != 1 || errs[0].Field != "spec.clusterIPs" || errs[0].Detail != "failed to allocate IP 10.96.0.10: provided IP is already allocated" {
			t.Errorf("refused: %v", errs)
		}
	})
	t.Run("requested cluster IP out of range", func(t *testing.T) {
		svc := svcOf(corev1.ServiceTypeClusterIP)
		svc.Spec.ClusterIP, svc.Spec.ClusterIPs = "10.0.0.10", []string{"10.0.0.10"}
		_, err := a.Assign(svc, nil, nil)
		var inv *InvalidError
		if !errors.As(err, &inv) || inv.Errs[0].Detail != "failed to allocate IP 10.0.0.10: the provided IP (10.0.0.10) is not in the valid range. The range of valid IPs is 10.96.0.0/12" {
			t.Errorf("got %v", err)
		}
	})
	t.Run("headless and ExternalName take nothing", func(t *testing.T) {
		h := svcOf(corev1.ServiceTypeClusterIP)
		h.Spec.ClusterIP, h.Spec.ClusterIPs = "None", []string{"None"}
		e := svcOf(corev1.ServiceTypeExternalName)
		for _, svc := range []*corev1.Service{h, e} {
			if as, err := a.Assign(svc, nil, nil); err != nil || len(as.Extra.Claims) != 0 {
				t.Errorf("%v: claims %v, %v", svc.Spec.Type, as, err)
			}
		}
	})
	t.Run("node ports", func(t *testing.T) {
		svc := svcOf(corev1.ServiceTypeNodePort,
			corev1.ServicePort{Name: "a", Port: 80, Protocol: corev1.ProtocolTCP},
			corev1.ServicePort{Name: "b", Port: 53, Protocol: corev1.ProtocolTCP, NodePort: 30053},
			corev1.ServicePort{Name: "c", Port: 53, Protocol: corev1.ProtocolUDP, NodePort: 30053})
		as, err := a.Assign(svc, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		p0 := svc.Spec.Ports[0].NodePort
		if !a.Ports.Contains(int(p0)) || p0 == 30053 {
			t.Errorf("random node port %d", p0)
		}
		keys := claimKeys(as)
		if len(keys) != 3 || !slices.Contains(keys, PortKey(30053)) || !slices.Contains(keys, PortKey(int(p0))) {
			t.Errorf("claims %v: the cluster IP, 30053 once, and the random port", keys)
		}
		errs := as.Refused(&storage.ClaimError{Taken: []string{PortKey(30053), PortKey(int(p0))}})
		if len(errs) != 1 || errs[0].Field != "spec.ports[1].nodePort" || errs[0].Detail != "provided port is already allocated" {
			t.Errorf("refused %v: only the requested port is the client's fault", errs)
		}
	})
	t.Run("node port out of range", func(t *testing.T) {
		svc := svcOf(corev1.ServiceTypeNodePort, corev1.ServicePort{Port: 80, NodePort: 8080})
		_, err := a.Assign(svc, nil, nil)
		var inv *InvalidError
		if !errors.As(err, &inv) || inv.Errs[0].Field != "spec.ports[0].nodePort" ||
			inv.Errs[0].Detail != "provided port is not in the valid range. The range of valid ports is 30000-32767" {
			t.Errorf("got %v", err)
		}
	})
	t.Run("update keeps what it holds and releases what it gives up", func(t *testing.T) {
		old := svcOf(corev1.ServiceTypeNodePort, corev1.ServicePort{Port: 80, NodePort: 30080})
		old.Spec.ClusterIP, old.Spec.ClusterIPs = "10.96.5.5", []string{"10.96.5.5"}
		same := old.DeepCopy()
		as, err := a.Assign(same, old, nil)
		if err != nil || len(as.Extra.Claims) != 0 || len(as.Extra.Releases) != 0 {
			t.Errorf("unchanged: %+v %v", as, err)
		}
		toClusterIP := old.DeepCopy()
		toClusterIP.Spec.Type, toClusterIP.Spec.Ports[0].NodePort = corev1.ServiceTypeClusterIP, 0
		as, err = a.Assign(toClusterIP, old, nil)
		if err != nil || len(as.Extra.Claims) != 0 || !slices.Equal(as.Extra.Releases, []string{PortKey(30080)}) {
			t.Errorf("to ClusterIP: %+v %v", as, err)
		}
		toExternal := old.DeepCopy()
		toExternal.Spec = corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "x.example.com"}
		as, err = a.Assign(toExternal, old, nil)
		if err != nil || !slices.Equal(as.Extra.Releases, []string{IPPrefix + "10.96.5.5", PortKey(30080)}) {
			t.Errorf("to ExternalName: %+v %v", as, err)
		}
	})
}

// TestAssignFull: with the allocation read, a full range is a FullError,
// and the last free value is found.
func TestAssignFull(t *testing.T) {
	a := New(nil, MustParseIPRange("10.0.0.0/29"), MustParsePortRange("30000-30001"))
	taken := &Taken{IPs: map[int]bool{0: true, 1: true, 2: true, 4: true, 5: true}, Ports: map[int]bool{30000: true}}
	svc := svcOf(corev1.ServiceTypeNodePort, corev1.ServicePort{Port: 80})
	if _, err := a.Assign(svc, nil, taken); err != nil || svc.Spec.ClusterIP != "10.0.0.4" || svc.Spec.Ports[0].NodePort != 30001 {
		t.Fatalf("last free values: %q %d %v", svc.Spec.ClusterIP, svc.Spec.Ports[0].NodePort, err)
	}
	taken.IPs[3] = true
	var full *FullError
	if _, err := a.Assign(svcOf(corev1.ServiceTypeClusterIP), nil, taken); !errors.As(err, &full) || err.Error() != "failed to allocate a serviceIP: range is full" {
		t.Errorf("full IP range: %v", err)
	}
	taken.IPs[3] = false
	taken.Ports[30001] = true
	if _, err := a.Assign(svcOf(corev1.ServiceTypeNodePort, corev1.ServicePort{Port: 80}), nil, taken); !errors.Is(err, ErrFull) ||
		err.Error() != "failed to allocate a nodePort: range is full" {
		t.Errorf("full port range: %v", err)
	}
}
