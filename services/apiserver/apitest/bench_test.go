package apitest

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
	"github.com/cairn-dev/cairn/services/embedded/embeddedtest"
)

// Bench sizes, as the apiserver issue sets them.
const (
	benchPods    = 20000
	benchClients = 64
	benchValue   = 1536
)

// BenchmarkAPICreatePods creates 20,000 pods with 64 concurrent clients
// through the full path (HTTP, authn, admission, validation, etcd txn, log)
// and, in the same run, measures raw etcd puts with 64 writers and 1.5 KB
// values on an etcd with the same settings. Run it with -benchtime=1x
// (go tool task bench:api); it reports:
//
//	creates/s, p50-ms, p99-ms        apiserver create throughput and latency
//	lag-p99-ms                       commit (WriteMeta.Time) to event received from the stream
//	etcd-puts/s, ratio               raw etcd put rate and creates/s divided by it
//	cpu-us/create, cpu-us/put        CPU time of this process (clients included)
//	                                 per create and per raw put: less noisy than
//	                                 rates on a shared machine
func BenchmarkAPICreatePods(b *testing.B) {
	for i := 0; i < b.N; i++ {
		cpu0 := processCPU()
		etcdRate := embeddedtest.PutRate(b, benchPods, benchClients, benchValue)
		putCPU := processCPU() - cpu0
		env := controlplanetest.Start(b, controlplanetest.Options{Fsync: os.Getenv("BENCH_NOFSYNC") == ""})
		lag := startLagProbe(b, env.JS)
		cpu1 := processCPU()
		creates, p50, p99, elapsed := createPods(b, env)
		lagP99 := lag.p99(b, benchPods)
		createCPU := processCPU() - cpu1
		b.ReportMetric(float64(createCPU.Microseconds())/float64(creates), "cpu-us/create")
		b.ReportMetric(float64(putCPU.Microseconds())/benchPods, "cpu-us/put")
		rate := float64(creates) / elapsed.Seconds()
		b.ReportMetric(rate, "creates/s")
		b.ReportMetric(float64(p50.Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(p99.Microseconds())/1000, "p99-ms")
		b.ReportMetric(float64(lagP99.Microseconds())/1000, "lag-p99-ms")
		b.ReportMetric(etcdRate, "etcd-puts/s")
		b.ReportMetric(rate/etcdRate, "ratio")
		b.Logf("created %d pods in %v: %.0f creates/s (p50 %v, p99 %v); publish lag p99 %v; raw etcd %.0f puts/s; ratio %.2f",
			creates, elapsed.Round(time.Millisecond), rate, p50, p99, lagP99, etcdRate, rate/etcdRate)
	}
}

// processCPU is the user and system CPU time this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func createPods(b *testing.B, env *controlplanetest.Env) (int, time.Duration, time.Duration, time.Duration) {
	lat := make([]time.Duration, benchPods)
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < benchClients; w++ {
		// One connection per client, as 64 separate processes would have:
		// a custom Dial keeps client-go from sharing one cached transport.
		cfg := rest.CopyConfig(env.Config)
		cfg.Dial = (&net.Dialer{}).DialContext
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			b.Fatal(err)
		}
		wg.Go(func() {
			for {
				n := next.Add(1)
				if n > benchPods {
					return
				}
				pod := &corev1.Pod{
					ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bench-%06d", n), Labels: map[string]string{"app": "bench"}},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "busybox:1.36",
						Command: []string{"sleep", "3600"}}}},
				}
				t0 := time.Now()
				if _, err := cs.CoreV1().Pods("default").Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
					b.Error(err)
					return
				}
				lat[n-1] = time.Since(t0)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	slices.Sort(lat)
	return benchPods, lat[len(lat)/2], lat[len(lat)*99/100], elapsed
}

// lagProbe records, for each pod event on the stream, the time from the
// write's commit timestamp to its arrival at a consumer.
type lagProbe struct {
	mu   sync.Mutex
	lags []time.Duration
	cc   jetstream.ConsumeContext
}

func startLagProbe(b *testing.B, js jetstream.JetStream) *lagProbe {
	ctx := context.Background()
	c, err := js.OrderedConsumer(ctx, events.Stream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{events.Filter("", "pods", "", "", "")},
		DeliverPolicy:  jetstream.DeliverNewPolicy,
	})
	if err != nil {
		b.Fatal(err)
	}
	p := &lagProbe{}
	p.cc, err = c.Consume(func(m jetstream.Msg) {
		now := time.Now()
		var ev events.Event
		if json.Unmarshal(m.Data(), &ev) == nil {
			p.mu.Lock()
			p.lags = append(p.lags, now.Sub(ev.Time))
			p.mu.Unlock()
		}
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(p.cc.Stop)
	return p
}

func (p *lagProbe) p99(b *testing.B, want int) time.Duration {
	deadline := time.Now().Add(time.Minute)
	for {
		p.mu.Lock()
		n := len(p.lags)
		p.mu.Unlock()
		if n >= want || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.lags) < want {
		b.Errorf("only %d of %d events reached the stream", len(p.lags), want)
	}
	if len(p.lags) == 0 {
		return 0
	}
	l := slices.Clone(p.lags)
	slices.Sort(l)
	return l[len(l)*99/100]
}
