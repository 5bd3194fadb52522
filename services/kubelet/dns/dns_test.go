package dns

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The tests are ported from kube's pkg/kubelet/network/dns/dns_test.go.

type warnings []string

func (w *warnings) record(_ *corev1.Pod, reason, msg string) { *w = append(*w, reason+" "+msg) }

func TestParseResolvConf(t *testing.T) {
	tests := []struct {
		data                           string
		nameservers, searches, options []string
		wantErr                        bool
	}{
		{"", nil, nil, nil, false},
		{" ", nil, nil, nil, false},
		{"\n", nil, nil, nil, false},
		{"\t\n\t", nil, nil, nil, false},
		{"#comment\n", nil, nil, nil, false},
		{" #comment\n", nil, nil, nil, false},
		{"#comment\n#comment", nil, nil, nil, false},
		{"#comment\nnameserver", nil, nil, nil, true},
		{"#comment\nnameserver\nsearch", nil, nil, nil, true},
		{"#comment\nnameserver 1.2.3.4\nsearch", []string{"1.2.3.4"}, nil, nil, false},
		{"nameserver 1.2.3.4", []string{"1.2.3.4"}, nil, nil, false},
		{" nameserver 1.2.3.4", []string{"1.2.3.4"}, nil, nil, false},
		{"\tnameserver 1.2.3.4", []string{"1.2.3.4"}, nil, nil, false},
		{"nameserver\t1.2.3.4", []string{"1.2.3.4"}, nil, nil, false},
		{"nameserver \t 1.2.3.4", []string{"1.2.3.4"}, nil, nil, false},
		{"nameserver 1.2.3.4\nnameserver 5.6.7.8", []string{"1.2.3.4", "5.6.7.8"}, nil, nil, false},
		{"nameserver 1.2.3.4 #comment", []string{"1.2.3.4"}, nil, nil, false},
		{"search ", nil, nil, nil, false},
		{"search foo", nil, []string{"foo"}, nil, false},
		{"search foo bar", nil, []string{"foo", "bar"}, nil, false},
		{"search foo. bar", nil, []string{"foo", "bar"}, nil, false},
		{"search foo bar bat\n", nil, []string{"foo", "bar", "bat"}, nil, false},
		{"search foo\nsearch bar", nil, []string{"bar"}, nil, false},
		{"nameserver 1.2.3.4\nsearch foo bar", []string{"1.2.3.4"}, []string{"foo", "bar"}, nil, false},
		{"nameserver 1.2.3.4\nsearch foo\nnameserver 5.6.7.8\nsearch bar", []string{"1.2.3.4", "5.6.7.8"}, []string{"bar"}, nil, false},
		{"#comment\nnameserver 1.2.3.4\n#comment\nsearch foo\ncomment", []string{"1.2.3.4"}, []string{"foo"}, nil, false},
		{"options ", nil, nil, nil, false},
		{"options ndots:5 attempts:2", nil, nil, []string{"ndots:5", "attempts:2"}, false},
		{"options ndots:1\noptions ndots:5 attempts:3", nil, nil, []string{"ndots:5", "attempts:3"}, false},
		{"nameserver 1.2.3.4\nsearch foo\nnameserver 5.6.7.8\nsearch bar\noptions ndots:5 attempts:4", []string{"1.2.3.4", "5.6.7.8"}, []string{"bar"}, []string{"ndots:5", "attempts:4"}, false},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%q", tc.data), func(t *testing.T) {
			cfg, err := ParseResolvConf(strings.NewReader(tc.data))
			if tc.wantErr {
				if err == nil {
					t.Fatal("want an error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(cfg.Servers, tc.nameservers) || !slices.Equal(cfg.Searches, tc.searches) || !slices.Equal(cfg.Options, tc.options) {
				t.Fatalf("got %+v, want servers %v searches %v options %v", cfg, tc.nameservers, tc.searches, tc.options)
			}
		})
	}
}

func repeat(n int, s ...string) []string {
	var out []string
	for range n {
		out = append(out, s...)
	}
	return out
}

func TestFitSearches(t *testing.T) {
	// 2048 = 128 + 127*15 + 15 separators.
	list2048 := append([]string{strings.Repeat("A", 128)}, repeat(15, strings.Repeat("A", 127))...)
	n32 := []string{"testNS.svc.TEST", "svc.TEST", "TEST"}
	for i := 4; i <= 32; i++ {
		n32 = append(n32, fmt.Sprint(i))
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "test_pod", Namespace: "testNS"}}
	tests := []struct {
		desc       string
		in, want   []string
		wantWarned bool
	}{
		{"3 search paths", []string{"testNS.svc.TEST", "svc.TEST", "TEST"}, []string{"testNS.svc.TEST", "svc.TEST", "TEST"}, false},
		{"5 search paths", []string{"testNS.svc.TEST", "svc.TEST", "TEST", "AAA", "BBB"}, []string{"testNS.svc.TEST", "svc.TEST", "TEST", "AAA", "BBB"}, false},
		{"a path over 253 characters", []string{"testNS.svc.TEST", "svc.TEST", "TEST", "AAA", strings.Repeat("B", 256), "BBB"}, []string{"testNS.svc.TEST", "svc.TEST", "TEST", "AAA", "BBB"}, true},
		{"2048 characters", list2048, list2048, false},
		{"2050 characters", append(slices.Clone(list2048), "B"), list2048, true},
		{"7 search paths", []string{"testNS.svc.TEST", "svc.TEST", "TEST", "AAA", "BBB", "CCC", "DDD"}, []string{"testNS.svc.TEST", "svc.TEST", "TEST", "AAA", "BBB", "CCC", "DDD"}, false},
		{"32 search paths", n32, n32, false},
		{"33 search paths", append(slices.Clone(n32), "33"), n32, true},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			var w warnings
			c := &Configurer{ClusterDomain: "TEST", Warn: w.record}
			got := c.fitSearches(slices.Clone(tc.in), pod)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			if tc.wantWarned {
				want := ReasonDNSConfigForming + " Search Line limits were exceeded, some search paths have been omitted, the applied search line is: " + strings.Join(tc.want, " ")
				if len(w) != 1 || w[0] != want {
					t.Fatalf("warnings %q, want %q", w, want)
				}
			} else if len(w) != 0 {
				t.Fatalf("unexpected warnings %q", w)
			}
		})
	}
}

func TestFitNameservers(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "test_pod", Namespace: "testNS"}}
	tests := []struct {
		desc       string
		in, want   []string
		wantWarned bool
	}{
		{"1 nameserver", []string{"127.0.0.1"}, []string{"127.0.0.1"}, false},
		{"3 nameservers", []string{"127.0.0.1", "10.0.0.10", "8.8.8.8"}, []string{"127.0.0.1", "10.0.0.10", "8.8.8.8"}, false},
		{"4 nameservers, trimmed to 3", []string{"127.0.0.1", "10.0.0.10", "8.8.8.8", "1.2.3.4"}, []string{"127.0.0.1", "10.0.0.10", "8.8.8.8"}, true},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			var w warnings
			c := &Configurer{Warn: w.record}
			if got := c.fitNameservers(tc.in, pod); !slices.Equal(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			if (len(w) > 0) != tc.wantWarned {
				t.Fatalf("warnings %q, want warned %v", w, tc.wantWarned)
			}
		})
	}
}

func TestMergeOptions(t *testing.T) {
	three := "3"
	tests := []struct {
		desc     string
		existing []string
		opts     []corev1.PodDNSConfigOption
		want     []string
	}{
		{"no pod options", []string{"ndots:5", "debug"}, nil, []string{"ndots:5", "debug"}},
		{"no duplicates", []string{"ndots:5", "debug"}, []corev1.PodDNSConfigOption{{Name: "single-request"}, {Name: "attempts", Value: &three}},
			[]string{"ndots:5", "debug", "single-request", "attempts:3"}},
		{"duplicates overridden", []string{"ndots:5", "debug"},
			[]corev1.PodDNSConfigOption{{Name: "ndots", Value: &three}, {Name: "debug"}, {Name: "single-request"}, {Name: "attempts", Value: &three}},
			[]string{"ndots:3", "debug", "single-request", "attempts:3"}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			if got := mergeOptions(tc.existing, tc.opts); !slices.Equal(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestPodType(t *testing.T) {
	tests := []struct {
		desc        string
		hostNetwork bool
		policy      corev1.DNSPolicy
		want        podDNSType
	}{
		{"ClusterFirst without hostNetwork", false, corev1.DNSClusterFirst, podDNSCluster},
		{"ClusterFirstWithHostNet with hostNetwork", true, corev1.DNSClusterFirstWithHostNet, podDNSCluster},
		{"ClusterFirstWithHostNet without hostNetwork", false, corev1.DNSClusterFirstWithHostNet, podDNSCluster},
		{"Default without hostNetwork", false, corev1.DNSDefault, podDNSHost},
		{"Default with hostNetwork", true, corev1.DNSDefault, podDNSHost},
		{"ClusterFirst with hostNetwork falls back to Default", true, corev1.DNSClusterFirst, podDNSHost},
		{"None", false, corev1.DNSNone, podDNSNone},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			pod := &corev1.Pod{Spec: corev1.PodSpec{DNSPolicy: tc.policy, HostNetwork: tc.hostNetwork}}
			if got := podType(pod); got != tc.want {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func writeResolvConf(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestPodDNS is kube's testGetPodDNS: four hostNetwork pods, without and
// then with a node resolv.conf.
func TestPodDNS(t *testing.T) {
	const clusterNS = "203.0.113.1"
	pods := make([]*corev1.Pod, 4)
	for i := range pods {
		pods[i] = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pod%d", i)}, Spec: corev1.PodSpec{HostNetwork: true}}
	}
	pods[0].Spec.DNSPolicy = corev1.DNSClusterFirstWithHostNet
	pods[1].Spec.DNSPolicy = corev1.DNSClusterFirst
	pods[2].Spec.DNSPolicy = corev1.DNSClusterFirst
	pods[2].Spec.HostNetwork = false
	pods[3].Spec.DNSPolicy = corev1.DNSDefault
	host := "nameserver 192.0.2.53\nsearch example.org corp.example.org\noptions timeout:2\n"
	for _, resolv := range []string{"", host} {
		t.Run(fmt.Sprintf("resolv.conf=%q", resolv), func(t *testing.T) {
			c := &Configurer{ClusterDNS: []net.IP{net.ParseIP(clusterNS)}, ClusterDomain: "kubernetes.io"}
			hostWant := Config{Servers: []string{"127.0.0.1"}, Searches: []string{"."}}
			clusterSearch := []string{".svc.kubernetes.io", "svc.kubernetes.io", "kubernetes.io"}
			if resolv != "" {
				c.ResolverConfig = writeResolvConf(t, resolv)
				hostWant = Config{Servers: []string{"192.0.2.53"}, Searches: []string{"example.org", "corp.example.org"}, Options: []string{"timeout:2"}}
				clusterSearch = append(clusterSearch, "example.org", "corp.example.org")
			}
			clusterWant := Config{Servers: []string{clusterNS}, Searches: clusterSearch, Options: []string{"ndots:5"}}
			for i, want := range []Config{clusterWant, hostWant, clusterWant, hostWant} {
				got, err := c.PodDNS(pods[i])
				if err != nil {
					t.Fatal(err)
				}
				if !equal(got, want) {
					t.Errorf("pod%d (%s, hostNetwork %v): got %+v, want %+v", i, pods[i].Spec.DNSPolicy, pods[i].Spec.HostNetwork, got, want)
				}
			}
		})
	}
}

func equal(a, b Config) bool {
	return slices.Equal(a.Servers, b.Servers) && slices.Equal(a.Searches, b.Searches) && slices.Equal(a.Options, b.Options)
}

// TestPodDNSCustom is kube's TestGetPodDNSCustom: dnsConfig merged into
// each policy.
func TestPodDNSCustom(t *testing.T) {
	const (
		clusterNameserver = "10.0.0.10"
		domain            = "kubernetes.io"
		hostNameserver    = "8.8.8.8"
		hostDomain        = "host.domain"
	)
	ndots := "3"
	c := &Configurer{
		ClusterDNS: []net.IP{net.ParseIP(clusterNameserver)}, ClusterDomain: domain,
		ResolverConfig: writeResolvConf(t, fmt.Sprintf("nameserver %s\nsearch %s\n", hostNameserver, hostDomain)),
	}
	custom := &corev1.PodDNSConfig{
		Nameservers: []string{"10.0.0.11"}, Searches: []string{"my.domain"},
		Options: []corev1.PodDNSConfigOption{{Name: "ndots", Value: &ndots}, {Name: "debug"}},
	}
	tests := []struct {
		desc        string
		hostNetwork bool
		policy      corev1.DNSPolicy
		dnsConfig   *corev1.PodDNSConfig
		want        Config
	}{
		{desc: "None without dnsConfig is empty", policy: corev1.DNSNone},
		{desc: "None with dnsConfig", policy: corev1.DNSNone,
			dnsConfig: &corev1.PodDNSConfig{Nameservers: []string{"203.0.113.1"}, Searches: []string{"my.domain", "second.domain"},
				Options: []corev1.PodDNSConfigOption{{Name: "ndots", Value: &ndots}, {Name: "debug"}}},
			want: Config{Servers: []string{"203.0.113.1"}, Searches: []string{"my.domain", "second.domain"}, Options: []string{"ndots:3", "debug"}}},
		{desc: "ClusterFirst with dnsConfig", policy: corev1.DNSClusterFirst, dnsConfig: custom,
			want: Config{Servers: []string{clusterNameserver, "10.0.0.11"},
				Searches: []string{"testNS.svc." + domain, "svc." + domain, domain, hostDomain, "my.domain"}, Options: []string{"ndots:3", "debug"}}},
		{desc: "ClusterFirstWithHostNet with dnsConfig", hostNetwork: true, policy: corev1.DNSClusterFirstWithHostNet, dnsConfig: custom,
			want: Config{Servers: []string{clusterNameserver, "10.0.0.11"},
				Searches: []string{"testNS.svc." + domain, "svc." + domain, domain, hostDomain, "my.domain"}, Options: []string{"ndots:3", "debug"}}},
		{desc: "Default with dnsConfig", policy: corev1.DNSDefault, dnsConfig: custom,
			want: Config{Servers: []string{hostNameserver, "10.0.0.11"}, Searches: []string{hostDomain, "my.domain"}, Options: []string{"ndots:3", "debug"}}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "test_pod", Namespace: "testNS"},
				Spec: corev1.PodSpec{HostNetwork: tc.hostNetwork, DNSPolicy: tc.policy, DNSConfig: tc.dnsConfig}}
			got, err := c.PodDNS(pod)
			if err != nil {
				t.Fatal(err)
			}
			if !equal(got, tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestMissingClusterDNS(t *testing.T) {
	var w warnings
	c := &Configurer{ClusterDomain: "cluster.local", Warn: w.record}
	got, err := c.PodDNS(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"}})
	if err != nil {
		t.Fatal(err)
	}
	if want := (Config{Servers: []string{"127.0.0.1"}, Searches: []string{"."}}); !equal(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	if len(w) != 1 || !strings.HasPrefix(w[0], ReasonMissingClusterDNS+" ") {
		t.Fatalf("warnings %q", w)
	}
}

func TestResolvConf(t *testing.T) {
	cfg := Config{Servers: []string{"10.96.0.10"}, Searches: []string{"default.svc.cluster.local", "svc.cluster.local", "cluster.local"}, Options: []string{"ndots:5"}}
	want := "search default.svc.cluster.local svc.cluster.local cluster.local\nnameserver 10.96.0.10\noptions ndots:5\n"
	if got := cfg.ResolvConf(); got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	back, err := ParseResolvConf(strings.NewReader(want))
	if err != nil || !equal(back, cfg) {
		t.Fatalf("parse back: %+v %v", back, err)
	}
}
