package envvars

import (
	"maps"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestFromServices is kube's pkg/kubelet/envvars TestFromServices.
func TestFromServices(t *testing.T) {
	svc := func(name, ip string, ports ...corev1.ServicePort) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.ServiceSpec{Selector: map[string]string{"bar": "baz"}, ClusterIP: ip, Ports: ports}}
	}
	sl := []*corev1.Service{
		svc("foo-bar", "1.2.3.4", corev1.ServicePort{Port: 8080, Protocol: "TCP"}),
		svc("abc-123", "5.6.7.8", corev1.ServicePort{Name: "u-d-p", Port: 8081, Protocol: "UDP"}, corev1.ServicePort{Name: "t-c-p", Port: 8081, Protocol: "TCP"}),
		svc("q-u-u-x", "9.8.7.6", corev1.ServicePort{Port: 8082, Protocol: "TCP"}, corev1.ServicePort{Name: "8083", Port: 8083, Protocol: "TCP"}),
		svc("svrc-clusterip-none", "None", corev1.ServicePort{Port: 8082, Protocol: "TCP"}),
		svc("svrc-clusterip-empty", "", corev1.ServicePort{Port: 8082, Protocol: "TCP"}),
	}
	want := []EnvVar{
		{"FOO_BAR_SERVICE_HOST", "1.2.3.4"},
		{"FOO_BAR_SERVICE_PORT", "8080"},
		{"FOO_BAR_PORT", "tcp://1.2.3.4:8080"},
		{"FOO_BAR_PORT_8080_TCP", "tcp://1.2.3.4:8080"},
		{"FOO_BAR_PORT_8080_TCP_PROTO", "tcp"},
		{"FOO_BAR_PORT_8080_TCP_PORT", "8080"},
		{"FOO_BAR_PORT_8080_TCP_ADDR", "1.2.3.4"},
		{"ABC_123_SERVICE_HOST", "5.6.7.8"},
		{"ABC_123_SERVICE_PORT", "8081"},
		{"ABC_123_SERVICE_PORT_U_D_P", "8081"},
		{"ABC_123_SERVICE_PORT_T_C_P", "8081"},
		{"ABC_123_PORT", "udp://5.6.7.8:8081"},
		{"ABC_123_PORT_8081_UDP", "udp://5.6.7.8:8081"},
		{"ABC_123_PORT_8081_UDP_PROTO", "udp"},
		{"ABC_123_PORT_8081_UDP_PORT", "8081"},
		{"ABC_123_PORT_8081_UDP_ADDR", "5.6.7.8"},
		{"ABC_123_PORT_8081_TCP", "tcp://5.6.7.8:8081"},
		{"ABC_123_PORT_8081_TCP_PROTO", "tcp"},
		{"ABC_123_PORT_8081_TCP_PORT", "8081"},
		{"ABC_123_PORT_8081_TCP_ADDR", "5.6.7.8"},
		{"Q_U_U_X_SERVICE_HOST", "9.8.7.6"},
		{"Q_U_U_X_SERVICE_PORT", "8082"},
		{"Q_U_U_X_SERVICE_PORT_8083", "8083"},
		{"Q_U_U_X_PORT", "tcp://9.8.7.6:8082"},
		{"Q_U_U_X_PORT_8082_TCP", "tcp://9.8.7.6:8082"},
		{"Q_U_U_X_PORT_8082_TCP_PROTO", "tcp"},
		{"Q_U_U_X_PORT_8082_TCP_PORT", "8082"},
		{"Q_U_U_X_PORT_8082_TCP_ADDR", "9.8.7.6"},
		{"Q_U_U_X_PORT_8083_TCP", "tcp://9.8.7.6:8083"},
		{"Q_U_U_X_PORT_8083_TCP_PROTO", "tcp"},
		{"Q_U_U_X_PORT_8083_TCP_PORT", "8083"},
		{"Q_U_U_X_PORT_8083_TCP_ADDR", "9.8.7.6"},
	}
	if got := FromServices(sl); !slices.Equal(got, want) {
		t.Fatalf("got\n%v\nwant\n%v", got, want)
	}
}

// TestForPod follows the cases of kube's TestMakeEnvironmentVariables
// that concern Services: the master Service always, the namespace's own
// Services with enableServiceLinks, a namespace's Service named kubernetes
// over the master one.
func TestForPod(t *testing.T) {
	svc := func(ns, name, ip string, port int32) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: corev1.ServiceSpec{ClusterIP: ip, Ports: []corev1.ServicePort{{Protocol: "TCP", Port: port}}}}
	}
	master := []*corev1.Service{svc("default", "kubernetes", "1.2.3.1", 8081), svc("default", "not-special", "1.2.3.8", 8088)}
	vars := func(prefix, ip, port string) map[string]string {
		url := "tcp://" + ip + ":" + port
		p := prefix + "_PORT_" + port + "_TCP"
		return map[string]string{prefix + "_SERVICE_HOST": ip, prefix + "_SERVICE_PORT": port, prefix + "_PORT": url,
			p: url, p + "_PROTO": "tcp", p + "_PORT": port, p + "_ADDR": ip}
	}
	merge := func(ms ...map[string]string) map[string]string {
		out := map[string]string{}
		for _, m := range ms {
			maps.Copy(out, m)
		}
		return out
	}
	off, on := false, true
	tests := []struct {
		desc  string
		ns    string
		links *bool
		local []*corev1.Service
		want  map[string]string
	}{
		{"links on: master and own Services", "test1", &on,
			[]*corev1.Service{svc("test1", "test", "1.2.3.3", 8083), svc("test2", "other", "1.2.3.4", 8084), svc("test1", "headless", "None", 80)},
			merge(vars("KUBERNETES", "1.2.3.1", "8081"), vars("TEST", "1.2.3.3", "8083"))},
		{"links nil is on", "test1", nil, []*corev1.Service{svc("test1", "test", "1.2.3.3", 8083)},
			merge(vars("KUBERNETES", "1.2.3.1", "8081"), vars("TEST", "1.2.3.3", "8083"))},
		{"links off: the master Service only", "test1", &off, []*corev1.Service{svc("test1", "test", "1.2.3.3", 8083)},
			vars("KUBERNETES", "1.2.3.1", "8081")},
		{"a namespace's kubernetes Service wins", "test1", &on, []*corev1.Service{svc("test1", "kubernetes", "1.2.3.2", 8082)},
			vars("KUBERNETES", "1.2.3.2", "8082")},
		{"default namespace: every Service there", "default", &on, master,
			merge(vars("KUBERNETES", "1.2.3.1", "8081"), vars("NOT_SPECIAL", "1.2.3.8", "8088"))},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			if got := ForPod(tc.ns, tc.links, master, tc.local); !maps.Equal(got, tc.want) {
				t.Fatalf("got\n%v\nwant\n%v", got, tc.want)
			}
		})
	}
}
