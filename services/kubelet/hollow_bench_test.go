package kubelet

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/events/consumer"
	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
)

// BenchmarkHollowNodes runs 1,000 hollow nodes in one process, creates
// 10,000 pods and binds them (pods/binding, round robin: no scheduler),
// and measures the time until all run, the rate, and the pod start-up
// latency (create request to the first Running status seen on the log,
// as Kubernetes' pod start-up SLO measures it). Set HOLLOW_NODES and
// HOLLOW_PODS to change the size, HOLLOW_LEASE_SECONDS the lease renewal
// interval (10 s, as real nodes).
func BenchmarkHollowNodes(b *testing.B) {
	nodes, pods := envInt("HOLLOW_NODES", 1000), envInt("HOLLOW_PODS", 10000)
	lease := time.Duration(envInt("HOLLOW_LEASE_SECONDS", 10)) * time.Second
	for range b.N {
		benchHollow(b, nodes, pods, lease)
	}
}

func benchHollow(b *testing.B, nodes, pods int, lease time.Duration) {
	b.StopTimer()
	env := controlplanetest.Start(b)
	ctx := context.Background()
	raiseConsumerLimit(b, env)
	ks, err := NewHollow(HollowConfig{RestConfig: env.Config, JS: env.JS, Nodes: nodes, NamePrefix: "h-", LeaseRenewInterval: lease,
		Log: controlplanetest.Logger("KUBELET_TEST_LOG")})
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	for _, k := range ks {
		controlplanetest.Run(b, k)
	}
	for i, k := range ks {
		if err := k.Pods().WaitForSync(ctx); err != nil {
			b.Fatal(err)
		}
		if i%100 == 99 {
			progress("%d pod caches synced after %v", i+1, time.Since(start))
		}
	}
	eventually(b, 5*time.Minute, "nodes registered", func() bool {
		l, err := env.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		return err == nil && len(l.Items) == nodes
	})
	b.Logf("%d hollow nodes registered in %v", nodes, time.Since(start))

	// Watch every pod through the log to time each pod's first Running.
	created := make([]time.Time, pods)
	running := make([]time.Time, pods)
	var nRunning atomic.Int64
	var mu sync.Mutex
	all, err := consumer.NewCache(consumer.CacheConfig[*corev1.Pod]{Resource: corev1.SchemeGroupVersion.WithResource("pods"),
		Config: env.Config, JS: env.JS})
	if err != nil {
		b.Fatal(err)
	}
	all.AddHandler(consumer.Handler[*corev1.Pod]{OnUpdate: func(_, p *corev1.Pod, _ *events.Event) {
		if p.Status.Phase != corev1.PodRunning {
			return
		}
		var i int
		fmt.Sscanf(p.Name, "p-%d", &i)
		mu.Lock()
		if running[i].IsZero() {
			running[i] = time.Now()
			nRunning.Add(1)
		}
		mu.Unlock()
	}})
	controlplanetest.Run(b, all)
	if err := all.WaitForSync(ctx); err != nil {
		b.Fatal(err)
	}

	b.StartTimer()
	start = time.Now()
	var wg sync.WaitGroup
	const writers = 64
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < pods; i += writers {
				p := newPod("default", fmt.Sprintf("p-%d", i), "")
				mu.Lock()
				created[i] = time.Now()
				mu.Unlock()
				if _, err := env.Client.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
					b.Error(err)
					return
				}
				bind := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: p.Name},
					Target: corev1.ObjectReference{Kind: "Node", Name: fmt.Sprintf("h-%d", i%nodes)}}
				// Binding checks the node's pod count; concurrent binds to
				// one node may conflict: retry as a scheduler would.
				for attempt := 0; ; attempt++ {
					err := env.Client.CoreV1().Pods("default").Bind(ctx, bind, metav1.CreateOptions{})
					if err == nil {
						break
					}
					if !apierrors.IsConflict(err) || attempt == 10 {
						b.Error(err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	progress("created and bound %d pods in %v", pods, time.Since(start))
	b.Logf("created and bound %d pods in %v", pods, time.Since(start))
	lastProgress := time.Now()
	eventually(b, 10*time.Minute, "all pods running", func() bool {
		if time.Since(lastProgress) > 10*time.Second {
			lastProgress = time.Now()
			progress("%d/%d pods running after %v", nRunning.Load(), pods, time.Since(start))
		}
		return nRunning.Load() == int64(pods)
	})
	took := time.Since(start)
	b.StopTimer()

	lat := make([]time.Duration, pods)
	for i := range pods {
		lat[i] = running[i].Sub(created[i])
	}
	slices.Sort(lat)
	p := func(q float64) time.Duration { return lat[int(q*float64(pods-1))] }
	if os.Getenv("KUBELET_BENCH_PROGRESS") != "" {
		mfs, _ := env.Metrics.Gather()
		for _, mf := range mfs {
			if mf.GetName() != "apiserver_request_total" {
				continue
			}
			for _, m := range mf.Metric {
				if m.Counter.GetValue() > 200 {
					progress("%v %v", m.Label, m.Counter.GetValue())
				}
			}
		}
	}
	b.ReportMetric(took.Seconds(), "s-all-running")
	b.ReportMetric(float64(pods)/took.Seconds(), "pods/s")
	b.ReportMetric(float64(p(0.5).Milliseconds()), "p50-ms")
	b.ReportMetric(float64(p(0.99).Milliseconds()), "p99-ms")
	b.Logf("%d nodes, %d pods: all running after %v (%.0f pods/s), start-up latency p50 %v p99 %v max %v",
		nodes, pods, took.Round(time.Millisecond), float64(pods)/took.Seconds(), p(0.5), p(0.99), lat[pods-1])
}

// progress reports on stderr while a long benchmark runs (b.Logf prints
// only at the end).
func progress(format string, args ...any) {
	if os.Getenv("KUBELET_BENCH_PROGRESS") != "" {
		fmt.Fprintf(os.Stderr, format+"\n", args...)
	}
}

// raiseConsumerLimit lifts NATS's default of 1,000 consumers per stream on
// CAIRN: every kubelet tails it with its own filtered consumer, so 1,000
// nodes plus the control plane's consumers exceed it. (The embedded NATS
// should set JetStreamLimits.DefaultMaxConsumers to -1; until it does, the
// benchmark sets an explicit stream limit.)
func raiseConsumerLimit(b *testing.B, env *controlplanetest.Env) {
	ctx := context.Background()
	s, err := env.JS.Stream(ctx, events.Stream)
	if err != nil {
		b.Fatal(err)
	}
	cfg := s.CachedInfo().Config
	cfg.MaxConsumers = 1 << 20
	if _, err := env.JS.UpdateStream(ctx, cfg); err != nil {
		b.Fatalf("raise the consumer limit of %s: %v", events.Stream, err)
	}
}
