package clusterdns

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
)

// BenchmarkQuery measures CoreDNS answering an A query for one of 1,000
// ClusterIP Services (the kubernetes plugin's answer from its informer
// cache, over UDP on loopback) against the same server answering a name
// of the hosts plugin (no Kubernetes lookup), measured in the same run:
// ns/op is the Service query; hosts-ns/op the baseline and ratio their
// quotient. It also reports how long a new Service takes to answer after
// its create returns (create-to-answer p50 and p99 over 20 Services).
func BenchmarkQuery(b *testing.B) {
	env := controlplanetest.Start(b, controlplanetest.Options{TLS: true})
	ctx := context.Background()
	const n = 1000
	for i := range n {
		if _, err := env.Client.CoreV1().Services("default").Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("svc-%d", i)},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}},
		}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	addr := startBenchDNS(b, env)
	c := &dns.Client{Timeout: 5 * time.Second}
	try := func(name string) (*dns.Msg, error) {
		m := new(dns.Msg)
		m.SetQuestion(name, dns.TypeA)
		r, _, err := c.Exchange(m, addr)
		return r, err
	}
	ask := func(name string) *dns.Msg {
		r, err := try(name)
		if err != nil {
			b.Fatal(err)
		}
		return r
	}
	// The server listens once the kubernetes plugin has synced.
	for deadline := time.Now().Add(wait); ; time.Sleep(50 * time.Millisecond) {
		if r, err := try("svc-999.default.svc.cluster.local."); err == nil && len(r.Answer) == 1 {
			break
		}
		if time.Now().After(deadline) {
			b.Fatal("svc-999 never answered")
		}
	}
	if r := ask("baseline.bench.test."); len(r.Answer) != 1 {
		b.Fatalf("hosts baseline: %v", r)
	}

	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		ask("svc-" + strconv.Itoa(i%n) + ".default.svc.cluster.local.")
	}
	svc := time.Since(start)
	b.StopTimer()
	start = time.Now()
	for range b.N {
		ask("baseline.bench.test.")
	}
	hosts := time.Since(start)
	b.ReportMetric(float64(hosts.Nanoseconds())/float64(b.N), "hosts-ns/op")
	b.ReportMetric(float64(svc)/float64(hosts), "ratio")

	var lat []time.Duration
	for i := range 20 {
		name := fmt.Sprintf("late-%d", i)
		if _, err := env.Client.CoreV1().Services("default").Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}},
		}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		created := time.Now()
		for len(ask(name+".default.svc.cluster.local.").Answer) == 0 {
			if time.Since(created) > wait {
				b.Fatalf("%s never answered", name)
			}
			time.Sleep(time.Millisecond)
		}
		lat = append(lat, time.Since(created))
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "create-to-answer-p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "create-to-answer-p99-ms")
}

// startBenchDNS runs cairn's Corefile plus a server block for bench.test
// answered by the hosts plugin, and returns the DNS address.
func startBenchDNS(b *testing.B, env *controlplanetest.Env) string {
	b.Helper()
	ln, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr := ln.LocalAddr().String()
	ln.Close()
	_, port, _ := net.SplitHostPort(addr)
	p, _ := strconv.Atoi(port)
	free := func() string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		defer l.Close()
		return l.Addr().String()
	}
	conf := Corefile(CorefileOptions{Port: p, Bind: "127.0.0.1", Health: free(), Ready: free(), Metrics: free(),
		Kubeconfig: env.Kubeconfig, NoReload: true}) +
		fmt.Sprintf("bench.test:%d {\n    bind 127.0.0.1\n    hosts {\n       192.0.2.1 baseline.bench.test\n    }\n}\n", p)
	path := filepath.Join(b.TempDir(), "Corefile")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, path) }()
	b.Cleanup(func() {
		cancel()
		<-done
	})
	return addr
}
