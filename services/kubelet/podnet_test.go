package kubelet

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestManagedHosts follows kube's TestManagedHostsFileContent.
func TestManagedHosts(t *testing.T) {
	const head = "# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n" +
		"fe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n"
	tests := []struct {
		desc         string
		ips          []string
		host, domain string
		aliases      []corev1.HostAlias
		want         string
	}{
		{"hostname only", []string{"123.45.67.89"}, "podFoo", "", nil, head + "123.45.67.89\tpodFoo\n"},
		{"with a domain", []string{"203.0.113.1"}, "podFoo", "domainFoo", nil, head + "203.0.113.1\tpodFoo.domainFoo\tpodFoo\n"},
		{"with aliases", []string{"203.0.113.1"}, "podFoo", "domainFoo",
			[]corev1.HostAlias{{IP: "123.45.67.89", Hostnames: []string{"foo", "bar", "baz"}}, {IP: "456.78.90.123", Hostnames: []string{"park", "doo", "boo"}}},
			head + "203.0.113.1\tpodFoo.domainFoo\tpodFoo\n\n# Entries added by HostAliases.\n123.45.67.89\tfoo\tbar\tbaz\n456.78.90.123\tpark\tdoo\tboo\n"},
		{"dual stack", []string{"203.0.113.1", "fd00::6"}, "podFoo", "domainFoo", nil,
			head + "203.0.113.1\tpodFoo.domainFoo\tpodFoo\nfd00::6\tpodFoo.domainFoo\tpodFoo\n"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			if got := managedHosts(tc.ips, tc.host, tc.domain, tc.aliases); got != tc.want {
				t.Fatalf("got\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

func TestHostnameAndDomain(t *testing.T) {
	k := &Kubelet{cfg: Config{ClusterDomain: "cluster.local"}}
	tests := []struct {
		pod              corev1.Pod
		wantHost, wantDN string
	}{
		{corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "default"}}, "web-1", ""},
		{corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "db-0", Namespace: "prod"}, Spec: corev1.PodSpec{Hostname: "db-0", Subdomain: "db"}},
			"db-0", "db.prod.svc.cluster.local"},
		{corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"}, Spec: corev1.PodSpec{Subdomain: "sub"}}, "p", "sub.default.svc.cluster.local"},
	}
	for _, tc := range tests {
		if h, d := k.hostnameAndDomain(&tc.pod); h != tc.wantHost || d != tc.wantDN {
			t.Errorf("%s: %q %q, want %q %q", tc.pod.Name, h, d, tc.wantHost, tc.wantDN)
		}
	}
}
