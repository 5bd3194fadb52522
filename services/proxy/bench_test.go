package proxy

import (
	"context"
	"fmt"
	"os"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
	"github.com/cairn-dev/cairn/services/netns/netnstest"
)

// BenchmarkProxy is go tool task bench:proxy's path through the
// apiserver: 1,000 Services x 10 endpoints (CAIRN_PROXY_BENCH_SERVICES)
// written through a real control plane, and a node's proxy (RunNode, as
// cairn up runs it) in a network namespace of the benchmark's own. It
// reports the time from the proxy's start to every Service programmed,
// the p50/p99 from an EndpointSlice update sent to the apiserver to the
// changed rule being live in the kernel (read back over netlink), and, in
// the same run, a full rewrite: a restarted proxy taking the table over.
func BenchmarkProxy(b *testing.B) {
	n := envInt("CAIRN_PROXY_BENCH_SERVICES", 1000)
	ns := netnstest.New(b, "nft")
	env := controlplanetest.Start(b)
	ctx := context.Background()
	b.Logf("writing %d Services x 10 endpoints through the apiserver", n)
	chains := make([]string, n)
	var wg sync.WaitGroup
	work := make(chan int)
	for range 16 {
		wg.Go(func() {
			for i := range work {
				name := fmt.Sprintf("s%d", i)
				if _, err := env.Client.CoreV1().Services("default").Create(ctx, &v1.Service{
					ObjectMeta: metav1.ObjectMeta{Name: name},
					Spec:       v1.ServiceSpec{Ports: []v1.ServicePort{{Name: "p80", Port: 80, TargetPort: intstr.FromInt(8080)}}},
				}, metav1.CreateOptions{}); err != nil {
					b.Error(err)
					return
				}
				if _, err := env.Client.DiscoveryV1().EndpointSlices("default").Create(ctx, benchSlice(i, true), metav1.CreateOptions{}); err != nil {
					b.Error(err)
					return
				}
				chains[i] = "service-" + hashAndTruncate("default/"+name+"/tcp/p80")
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}

	reg := prometheus.NewRegistry()
	b.ResetTimer()
	start := time.Now()
	stop := benchNode(b, env, ns, reg)
	waitProgrammed(b, reg, n)
	programAll := time.Since(start)

	conn, err := nsConn(b, ns)
	if err != nil {
		b.Fatal(err)
	}
	var lat []time.Duration
	for j := range 50 {
		// 50 different Services, each losing one of its 10 endpoints.
		i := (j * 7919) % n
		s := benchSlice(i, false)
		cur, err := env.Client.DiscoveryV1().EndpointSlices("default").Get(ctx, s.Name, metav1.GetOptions{})
		if err != nil {
			b.Fatal(err)
		}
		s.ResourceVersion = cur.ResourceVersion
		const want = 9
		t0 := time.Now()
		if _, err := env.Client.DiscoveryV1().EndpointSlices("default").Update(ctx, s, metav1.UpdateOptions{}); err != nil {
			b.Fatal(err)
		}
		for deadline := t0.Add(60 * time.Second); modulus(conn, chains[i]) != want; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				b.Fatalf("Service s%d: numgen modulus not %d after 60s", i, want)
			}
		}
		lat = append(lat, time.Since(t0))
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })

	stop()
	reg = prometheus.NewRegistry()
	start = time.Now()
	benchNode(b, env, ns, reg)
	waitProgrammed(b, reg, n)
	rewrite := time.Since(start)
	b.StopTimer()
	p50, p99 := lat[len(lat)/2], lat[len(lat)*99/100]
	b.ReportMetric(programAll.Seconds(), "s-program-all")
	b.ReportMetric(float64(p50.Microseconds())/1000, "ms-change-p50")
	b.ReportMetric(float64(p99.Microseconds())/1000, "ms-change-p99")
	b.ReportMetric(rewrite.Seconds(), "s-full-rewrite")
	b.ReportMetric(rewrite.Seconds()/p50.Seconds(), "rewrite/change-p50")
	b.Logf("%d Services x 10 endpoints through the apiserver: program all %v; slice update to rule live p50 %v p99 %v; full rewrite (restarted proxy) %v, %.0fx a change's p50",
		n, programAll.Round(time.Millisecond), p50.Round(time.Microsecond), p99.Round(time.Microsecond), rewrite.Round(time.Millisecond), rewrite.Seconds()/p50.Seconds())
}

// benchSlice is Service i's slice of 10 endpoints; unless ready, its first
// endpoint is not ready.
func benchSlice(i int, ready bool) *discovery.EndpointSlice {
	s := &discovery.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: fmt.Sprintf("s%d-1", i), Namespace: "default", Labels: map[string]string{discovery.LabelServiceName: fmt.Sprintf("s%d", i)}},
		AddressType: discovery.AddressTypeIPv4,
		Ports:       []discovery.EndpointPort{{Name: ptr("p80"), Port: ptr(int32(8080)), Protocol: ptr(v1.ProtocolTCP)}},
	}
	for k := range 10 {
		g := i*10 + k
		e := discovery.Endpoint{Addresses: []string{fmt.Sprintf("10.%d.%d.%d", 100+g>>16, g>>8&255, g&255)}}
		if k == 0 && !ready {
			e.Conditions.Ready = ptr(false)
		}
		s.Endpoints = append(s.Endpoints, e)
	}
	return s
}

func benchNode(b *testing.B, env *controlplanetest.Env, ns string, reg *prometheus.Registry) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := RunNode(ctx, NodeConfig{RestConfig: env.ConfigFor(controlplanetest.ProxyToken), JS: env.JS, NodeName: "bench",
			NetNS: ns, ClusterCIDR: cidr, Metrics: reg}); err != nil {
			b.Errorf("RunNode: %v", err)
		}
	})
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); wg.Wait() }) }
	b.Cleanup(stop)
	return stop
}

// waitProgrammed waits until the proxy's gauge shows at least n
// service-ips elements (one per Service port with endpoints, and the
// kubernetes Service's).
func waitProgrammed(b *testing.B, reg *prometheus.Registry, n int) {
	b.Helper()
	deadline := time.Now().Add(30 * time.Minute)
	for metricValue(b, reg, "cairn_proxy_rules_programmed", "kind", "elements") < float64(n) {
		if time.Now().After(deadline) {
			b.Fatalf("not %d Services programmed after 30m", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// nsConn is a netlink connection into the namespace, to read rules back.
func nsConn(b *testing.B, ns string) (*nftables.Conn, error) {
	fd, err := unix.Open(ns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	b.Cleanup(func() { unix.Close(fd) }) // each of the conn's dials uses it
	return nftables.New(nftables.WithNetNSFd(fd))
}

// modulus is the numgen modulus of the chain's balancing rule as the
// kernel holds it, in whichever of the proxy's tables has the chain (0 if
// none has).
func modulus(conn *nftables.Conn, chain string) uint32 {
	tables, err := conn.ListTablesOfFamily(nftables.TableFamilyIPv4)
	if err != nil {
		return 0
	}
	for _, t := range tables {
		if _, ok := parseShardTable(t.Name); !ok {
			continue
		}
		rules, err := conn.GetRules(t, &nftables.Chain{Name: chain})
		if err != nil {
			continue
		}
		for _, r := range rules {
			for _, e := range r.Exprs {
				if ng, ok := e.(*expr.Numgen); ok {
					return ng.Modulus
				}
			}
		}
	}
	return 0
}

func envInt(name string, def int) int {
	var v int
	if _, err := fmt.Sscan(os.Getenv(name), &v); err != nil || v <= 0 {
		return def
	}
	return v
}
