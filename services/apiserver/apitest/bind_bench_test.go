package apitest

import (
	"context"
	"fmt"
	"net"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
	"github.com/cairn-dev/cairn/services/embedded/embeddedtest"
)

// Sizes of the binding benchmark.
const (
	benchBindPods    = 5000
	benchBindClients = 32
)

// BenchmarkAPIBindPods binds 5,000 existing pods through pods/binding with
// 32 concurrent clients, each pod to node i mod nodes, so every binding
// goes through the overcommit check against the node and its ledger:
// 100PerNode fills 50 nodes with 100 pods each (long ledgers), 2PerNode
// spreads them over 2,500 nodes as the scheduler benchmark does (5,000
// nodes, 10,000 pods). Run it with -benchtime=1x (BENCH_NOFSYNC=1 turns
// fsync off). It reports:
//
//	binds/s, p50-ms, p99-ms   binding throughput and latency
//	cpu-us/bind               CPU time of this process (apiserver, etcd,
//	                          NATS and the clients) per binding: less noisy
//	                          than the rate on a shared machine
func BenchmarkAPIBindPods(b *testing.B) {
	for _, tc := range []struct {
		name  string
		nodes int
	}{{"100PerNode", 50}, {"2PerNode", 2500}} {
		b.Run(tc.name, func(b *testing.B) {
			for range b.N {
				benchBind(b, tc.nodes)
			}
		})
	}
}

func benchBind(b *testing.B, nodes int) {
	env := controlplanetest.Start(b, controlplanetest.Options{Fsync: os.Getenv("BENCH_NOFSYNC") == "", TLS: os.Getenv("BENCH_HTTP") == ""})
	clients := make([]*kubernetes.Clientset, benchBindClients)
	for i := range clients {
		// One connection per client, as separate binders would have.
		cfg := rest.CopyConfig(env.Config)
		cfg.QPS, cfg.Burst = -1, 0
		cfg.Dial = (&net.Dialer{}).DialContext
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			b.Fatal(err)
		}
		clients[i] = cs
	}
	parallel(b, clients, nodes, func(cs *kubernetes.Clientset, i int) error {
		_, err := cs.CoreV1().Nodes().Create(context.Background(), nodeWith(fmt.Sprintf("node-%04d", i), "64", "512Gi", "110"), metav1.CreateOptions{})
		return err
	})
	parallel(b, clients, benchBindPods, func(cs *kubernetes.Clientset, i int) error {
		_, err := cs.CoreV1().Pods("default").Create(context.Background(), podRequesting(fmt.Sprintf("pod-%05d", i), "100m", "100Mi"), metav1.CreateOptions{})
		return err
	})
	settle(b, env) // the log has published the setup's writes
	lat := make([]time.Duration, benchBindPods)
	b.ResetTimer()
	cpu0 := embeddedtest.ProcessCPU()
	start := time.Now()
	parallel(b, clients, benchBindPods, func(cs *kubernetes.Clientset, i int) error {
		t0 := time.Now()
		err := cs.CoreV1().Pods("default").Bind(context.Background(), &corev1.Binding{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pod-%05d", i)},
			Target:     corev1.ObjectReference{Kind: "Node", Name: fmt.Sprintf("node-%04d", i%nodes)},
		}, metav1.CreateOptions{})
		lat[i] = time.Since(t0)
		return err
	})
	elapsed := time.Since(start)
	settle(b, env) // the bindings' events are published: their cost counts
	cpu := embeddedtest.ProcessCPU() - cpu0
	b.StopTimer()
	slices.Sort(lat)
	rate := benchBindPods / elapsed.Seconds()
	b.ReportMetric(rate, "binds/s")
	b.ReportMetric(float64(cpu.Microseconds())/benchBindPods, "cpu-us/bind")
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	b.Logf("bound %d pods to %d nodes in %v: %.0f binds/s, %.0f cpu-us/bind", benchBindPods, nodes,
		elapsed.Round(time.Millisecond), rate, float64(cpu.Microseconds())/benchBindPods)
}

// parallel calls f(client, i) for i in [0, n), one worker per client.
func parallel(b *testing.B, clients []*kubernetes.Clientset, n int, f func(cs *kubernetes.Clientset, i int) error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for _, cs := range clients {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := f(cs, i); err != nil {
					b.Errorf("item %d: %v", i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
}
