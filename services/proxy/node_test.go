package proxy

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
	"github.com/cairn-dev/cairn/services/netns"
	"github.com/cairn-dev/cairn/services/netns/netnstest"
)

// nsTable is nft list table of the proxy's table in ns ("" when absent).
func nsTable(t *testing.T, ns string) string {
	t.Helper()
	out, err := exec.Command("ip", "netns", "exec", filepath.Base(ns), "nft", "list", "table", "ip", TableName).CombinedOutput()
	if err != nil {
		return ""
	}
	return string(out)
}

func hostHasTable() bool {
	return exec.Command("nft", "list", "table", "ip", TableName).Run() == nil
}

// TestRunNode runs a node's proxy as cairn up and cairn kubelet do, against
// a real control plane, as user system:kube-proxy (RBAC: the bootstrap
// ClusterRole system:node-proxier): the table is programmed inside the
// node's namespace (and not on the host), the apiserver is reached from
// inside the namespace through a Service whose endpoint is the relay at
// APIServerAddress, and a restarted proxy keeps the rules while it is down
// and then resyncs what changed meanwhile.
func TestRunNode(t *testing.T) {
	// RunNode routes the Service range to the namespace's lo.
	ns := netnstest.New(t, "nft")
	hostBefore := hostHasTable()
	env := controlplanetest.Start(t)
	ctx := context.Background()
	port := netip.MustParseAddrPort(env.Addr).Port()

	// A Service to the apiserver through the relay, as default/kubernetes
	// is on a cairn up (whose apiserver advertises APIServerAddress), and
	// one to nothing.
	api := createService(t, env, "api", 443, int(port))
	apiSlice := &discovery.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "api-1", Namespace: "default", Labels: map[string]string{discovery.LabelServiceName: "api"}},
		AddressType: discovery.AddressTypeIPv4,
		Endpoints:   []discovery.Endpoint{{Addresses: []string{APIServerAddress}}},
		Ports:       []discovery.EndpointPort{{Name: ptr("https"), Port: ptr(int32(port)), Protocol: ptr(v1.ProtocolTCP)}},
	}
	if _, err := env.Client.DiscoveryV1().EndpointSlices("default").Create(ctx, apiSlice, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	empty := createService(t, env, "empty", 80, 8080)

	reg := prometheus.NewRegistry()
	stop := runNode(t, env, ns, reg)
	version := "http://" + net.JoinHostPort(api.Spec.ClusterIP, "443") + "/version"
	controlplanetest.Eventually(t, 30*time.Second, "GET "+version+" from inside the namespace", func() bool {
		body, err := nsGet(ctx, ns, version)
		return err == nil && strings.Contains(body, `"gitVersion"`)
	})
	if _, err := nsGet(ctx, ns, "http://"+net.JoinHostPort(empty.Spec.ClusterIP, "80")+"/"); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Errorf("a Service without endpoints: %v, want connection refused", err)
	}
	if got := metricValue(t, reg, "kubeproxy_sync_proxy_rules_duration_seconds", "sync", "full"); got < 1 {
		t.Errorf("full syncs observed: %v, want at least 1", got)
	}
	// default/kubernetes and api: service-ips; empty: no-endpoint-services.
	if got := metricValue(t, reg, "cairn_proxy_rules_programmed", "kind", "elements"); got < 3 {
		t.Errorf("cairn_proxy_rules_programmed{kind=elements} = %v, want at least 3", got)
	}
	table := nsTable(t, ns)
	if !strings.Contains(table, " : "+APIServerAddress+" . "+fmt.Sprint(port)) {
		t.Errorf("the namespace's table has no DNAT to the relay:\n%s", table)
	}
	if !hostBefore && hostHasTable() {
		t.Errorf("the proxy programmed the host's nftables, not the namespace's")
	}

	// The proxy follows its own Node: its zone picks the endpoints
	// hinted for it.
	zonedNode(t, env, ns, port)
	// externalTrafficPolicy Local: the health check on the
	// healthCheckNodePort, in the node's namespace; no endpoint here.
	lb, err := env.Client.CoreV1().Services("default").Create(ctx, &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "lb"},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, ExternalTrafficPolicy: v1.ServiceExternalTrafficPolicyLocal,
			Ports: []v1.ServicePort{{Port: 80, TargetPort: intstr.FromInt(8080)}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if lb.Spec.HealthCheckNodePort == 0 {
		t.Fatalf("no healthCheckNodePort allocated: %+v", lb.Spec)
	}
	health := "http://" + net.JoinHostPort(APIServerAddress, fmt.Sprint(lb.Spec.HealthCheckNodePort)) + "/healthz"
	controlplanetest.Eventually(t, 30*time.Second, "GET "+health+" answers no local endpoint", func() bool {
		body, err := nsGet(ctx, ns, health)
		return err == nil && strings.Contains(body, `"localEndpoints": 0`) && strings.Contains(body, `"name": "lb"`)
	})

	// Restart: the rules stay while the proxy is down; what changed
	// meanwhile is synced when it is back.
	table = nsTable(t, ns)
	stop()
	if after := nsTable(t, ns); after != table {
		t.Fatalf("the table changed when the proxy stopped:\n%s\nbefore:\n%s", after, table)
	}
	if err := env.Client.CoreV1().Services("default").Delete(ctx, "empty", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	runNode(t, env, ns, reg) // the same registry, as cairn up's node restarted in process
	controlplanetest.Eventually(t, 30*time.Second, "the Service deleted while the proxy was down has no rules", func() bool {
		table := nsTable(t, ns)
		return table != "" && !strings.Contains(table, empty.Spec.ClusterIP)
	})
	controlplanetest.Eventually(t, 30*time.Second, "GET "+version+" after the restart", func() bool {
		body, err := nsGet(ctx, ns, version)
		return err == nil && strings.Contains(body, `"gitVersion"`)
	})
}

func ptr[T any](v T) *T { return &v }

// zonedNode creates the proxy's Node n1 in zone-a and a Service with two
// endpoints hinted for zone-a (the relay) and zone-b (an address nothing
// answers): only the relay is programmed, then, once n1 moves to zone-b,
// only the other.
func zonedNode(t *testing.T, env *controlplanetest.Env, ns string, port uint16) {
	t.Helper()
	ctx := context.Background()
	node, err := env.Client.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{
		Name: "n1", Labels: map[string]string{v1.LabelTopologyZone: "zone-a"}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	createService(t, env, "zoned", 443, int(port))
	hint := func(zone string) *discovery.EndpointHints {
		return &discovery.EndpointHints{ForZones: []discovery.ForZone{{Name: zone}}}
	}
	if _, err := env.Client.DiscoveryV1().EndpointSlices("default").Create(ctx, &discovery.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "zoned-1", Namespace: "default", Labels: map[string]string{discovery.LabelServiceName: "zoned"}},
		AddressType: discovery.AddressTypeIPv4,
		Endpoints: []discovery.Endpoint{
			{Addresses: []string{APIServerAddress}, Hints: hint("zone-a")},
			{Addresses: []string{"10.99.0.1"}, Hints: hint("zone-b")},
		},
		Ports: []discovery.EndpointPort{{Name: ptr("https"), Port: ptr(int32(port)), Protocol: ptr(v1.ProtocolTCP)}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// has: the zoned Service's chain DNATs to ip.
	has := func(table, ip string) bool {
		for _, chain := range strings.Split(table, "chain ")[1:] {
			if strings.HasPrefix(chain, "service-") && strings.Contains(chain, "-default/zoned/tcp/https {") && strings.Contains(chain, " : "+ip+" . ") {
				return true
			}
		}
		return false
	}
	controlplanetest.Eventually(t, 30*time.Second, "zone-a: only the endpoint hinted for it", func() bool {
		table := nsTable(t, ns)
		return has(table, APIServerAddress) && !has(table, "10.99.0.1")
	})
	node.Labels[v1.LabelTopologyZone] = "zone-b"
	if _, err := env.Client.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	controlplanetest.Eventually(t, 30*time.Second, "zone-b: only the endpoint hinted for it", func() bool {
		table := nsTable(t, ns)
		return !has(table, APIServerAddress) && has(table, "10.99.0.1")
	})
}

// metricValue is the value of the metric name whose label is value in
// reg: a gauge's value, a histogram's sample count; -1 when absent.
func metricValue(t testing.TB, reg *prometheus.Registry, name, label, value string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() != label || l.GetValue() != value {
					continue
				}
				if h := m.GetHistogram(); h != nil {
					return float64(h.GetSampleCount())
				}
				return m.GetGauge().GetValue()
			}
		}
	}
	return -1
}

func createService(t *testing.T, env *controlplanetest.Env, name string, port, target int) *v1.Service {
	t.Helper()
	svc, err := env.Client.CoreV1().Services("default").Create(context.Background(), &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       v1.ServiceSpec{Ports: []v1.ServicePort{{Name: "https", Port: int32(port), TargetPort: intstr.FromInt(target)}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// runNode runs RunNode in ns until the returned stop (or the test's end).
func runNode(t *testing.T, env *controlplanetest.Env, ns string, reg prometheus.Registerer) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		err := RunNode(ctx, NodeConfig{RestConfig: env.ConfigFor(controlplanetest.ProxyToken), JS: env.JS, NodeName: "n1", NetNS: ns,
			ClusterCIDR: cidr, Metrics: reg, Log: controlplanetest.Logger("PROXY_TEST_LOG")})
		if err != nil {
			t.Errorf("RunNode: %v", err)
		}
	})
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); wg.Wait() }) }
	t.Cleanup(stop)
	return stop
}

// nsGet fetches url from inside the namespace.
func nsGet(ctx context.Context, ns, url string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	hc := &http.Client{Transport: &http.Transport{DialContext: netns.Dialer(ns), DisableKeepAlives: true}}
	defer hc.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}
