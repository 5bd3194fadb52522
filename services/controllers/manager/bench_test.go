package manager_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/services/controllers/manager"
	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
	"github.com/cairn-dev/cairn/services/embedded/embeddedtest"
)

// Bench sizes, as the controllers issue sets them.
const (
	benchDeployments = 100
	benchReplicas    = 100
	benchPods        = benchDeployments * benchReplicas
	benchApplyConns  = 16   // concurrent clients applying the deployments
	benchEtcdWriters = 64   // raw etcd put rate: writers and value size
	benchEtcdValue   = 1536 // as bench:api
	benchPartitions  = 32   // the shard default; checked while waiting
)

// BenchmarkControllers applies 100 deployments of 100 replicas each (10,000
// pods; no nodes) to a durable control plane with 1 and with 3
// controller-manager replicas running in this process (each its own NATS
// connection, HTTP connection and identity, all sharded), and counts the
// pods' ADDED events on the log. Run it with -benchtime=1x
// (go tool task bench:controllers); per replica count it reports:
//
//	pods/s                 10,000 / (first apply .. last pod created)
//	seconds-to-all-pods    last apply .. last pod created
//	etcd-puts/s, ratio     raw etcd put rate of this run and pods/s divided by it
//	cpu-us/pod             CPU time of this process (control plane, controllers,
//	                       clients) per pod, from the first apply
//	cpu-busy               that CPU time over the cores' time in the same span
func BenchmarkControllers(b *testing.B) {
	for _, replicas := range []int{1, 3} {
		b.Run(fmt.Sprintf("replicas=%d", replicas), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				benchControllers(b, replicas)
			}
		})
	}
}

func benchControllers(b *testing.B, replicas int) {
	etcdRate := embeddedtest.PutRate(b, benchPods, benchEtcdWriters, benchEtcdValue)
	env := controlplanetest.Start(b, controlplanetest.Options{Fsync: os.Getenv("BENCH_NOFSYNC") == "", TLS: os.Getenv("BENCH_HTTP") == ""})
	ms := startManagers(b, env, replicas)
	waitSettled(b, env, replicas)
	if os.Getenv("BENCH_SERVICES") != "" {
		// A Service per deployment: the endpoint controllers then follow
		// every pod of the namespace in each replica.
		createServices(b, env)
	}

	counter := countAddedPods(b, env.JS)
	delivered0 := podEventsDelivered(ms)
	cpu0 := embeddedtest.ProcessCPU()
	first, last := applyDeployments(b, env)
	done, ok := counter.wait(benchPods, 3*time.Minute)
	if !ok {
		reportShort(b, env)
		b.Fatalf("only %d of %d pods created within 3m", counter.added.Load(), benchPods)
	}
	cpu := embeddedtest.ProcessCPU() - cpu0
	// Pod events each replica received: all of them with one replica, its
	// partitions' share with more.
	perReplica := float64(podEventsDelivered(ms)-delivered0) / float64(replicas)
	defer func() {
		// Speed must not come from overshooting: no pod beyond the
		// replicas asked for may be created.
		time.Sleep(time.Second)
		if n := counter.added.Load(); n != benchPods {
			b.Errorf("%d pods created for %d replicas", n, benchPods)
		}
	}()
	// busy is the share of the machine's cores this process used while
	// the pods were created: below 1, the run waited on something else
	// than CPU (fsync, round trips).
	busy := cpu.Seconds() / (time.Since(first).Seconds() * float64(runtime.NumCPU()))
	b.ReportMetric(float64(cpu.Microseconds())/benchPods, "cpu-us/pod")
	b.ReportMetric(busy, "cpu-busy")

	rate := benchPods / done.Sub(first).Seconds()
	toAll := done.Sub(last)
	b.ReportMetric(rate, "pods/s")
	b.ReportMetric(toAll.Seconds(), "seconds-to-all-pods")
	b.ReportMetric(etcdRate, "etcd-puts/s")
	b.ReportMetric(rate/etcdRate, "ratio")
	b.ReportMetric(perReplica, "pod-events/replica")
	b.Logf("replicas=%d: %d deployments x %d applied in %v; all %d pods %v after the last apply (%v after the first): %.0f pods/s; raw etcd %.0f puts/s; ratio %.2f; %.0f cpu-µs/pod, cpu busy %.0f%%; %.0f pod events received per replica",
		replicas, benchDeployments, benchReplicas, last.Sub(first).Round(time.Millisecond), benchPods,
		toAll.Round(time.Millisecond), done.Sub(first).Round(time.Millisecond), rate, etcdRate, rate/etcdRate, float64(cpu.Microseconds())/benchPods, 100*busy, perReplica)
}

// podEventsDelivered sums the pod events the managers' caches received.
func podEventsDelivered(ms []*manager.Manager) int64 {
	var n int64
	for _, m := range ms {
		n += m.PodCacheStats().Delivered
	}
	return n
}

// startManagers runs n sharded controller-managers, each with its own NATS
// and HTTP connections, as n processes would; they stop at cleanup.
func startManagers(b *testing.B, env *controlplanetest.Env, n int) []*manager.Manager {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	var ms []*manager.Manager
	for i := range n {
		nc, err := nats.Connect(env.NATSURL(), nats.Name(fmt.Sprintf("bench-cm-%d", i)))
		if err != nil {
			b.Fatal(err)
		}
		js, err := jetstream.New(nc)
		if err != nil {
			b.Fatal(err)
		}
		rc := env.ConfigFor(controlplanetest.ControllerToken)
		rc.Dial = (&net.Dialer{}).DialContext // no transport shared with the others
		id := fmt.Sprintf("bench-cm-%d", i)
		// BENCH_WORKERS overrides the default workers per controller.
		workers, _ := strconv.Atoi(os.Getenv("BENCH_WORKERS"))
		m, err := manager.New(manager.Config{RestConfig: rc, JS: js, Identity: id, Shard: true, Workers: workers, Log: log.With("replica", id)})
		if err != nil {
			b.Fatal(err)
		}
		ms = append(ms, m)
		wg.Go(func() {
			defer nc.Close()
			if err := m.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
				b.Errorf("manager %s: %v", id, err)
			}
		})
	}
	b.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	return ms
}

// waitSettled waits until every partition is held, by exactly n distinct
// replicas, unchanged for 3 s (several sharder rounds), and then until probe
// deployments (0 replicas) get their ReplicaSets, so catch-ups are done.
func waitSettled(b *testing.B, env *controlplanetest.Env, n int) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var kv jetstream.KeyValue
	var prev map[string]string
	var since time.Time
	for {
		if ctx.Err() != nil {
			b.Fatalf("partitions did not settle on %d replicas: last %v", n, prev)
		}
		time.Sleep(250 * time.Millisecond)
		if kv == nil {
			var err error
			if kv, err = env.JS.KeyValue(ctx, "cairn_shards_controller_manager"); err != nil {
				continue
			}
		}
		cur := map[string]string{}
		holders := map[string]bool{}
		for p := range benchPartitions {
			e, err := kv.Get(ctx, fmt.Sprintf("p.%d", p))
			if err != nil {
				break
			}
			cur[e.Key()] = string(e.Value())
			holders[string(e.Value())] = true
		}
		if len(cur) != benchPartitions || len(holders) != n || !maps.Equal(cur, prev) {
			prev, since = cur, time.Now()
			continue
		}
		if time.Since(since) >= 3*time.Second {
			break
		}
	}

	const probes = 8
	apps := env.Client.AppsV1().Deployments("default")
	for i := range probes {
		if _, err := apps.Create(ctx, benchDeployment(fmt.Sprintf("probe-%d", i), 0), metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	for {
		l, err := env.Client.AppsV1().ReplicaSets("default").List(ctx, metav1.ListOptions{})
		if err == nil && len(l.Items) >= probes {
			return
		}
		if ctx.Err() != nil {
			b.Fatalf("probe deployments did not get their ReplicaSets: %v", err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func benchDeployment(name string, replicas int32) *appsv1.Deployment {
	return controlplanetest.Deployment("", name, replicas, corev1.Container{Name: "app", Image: "busybox:1.36",
		Command: []string{"sleep", "3600"}})
}

// createServices creates a Service selecting each bench deployment's pods.
func createServices(b *testing.B, env *controlplanetest.Env) {
	for n := 1; n <= benchDeployments; n++ {
		name := fmt.Sprintf("bench-%03d", n)
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": name}, Ports: []corev1.ServicePort{{Port: 80}}}}
		if _, err := env.Client.CoreV1().Services("default").Create(context.Background(), svc, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

// applyDeployments creates the deployments with benchApplyConns clients and
// returns when the first create was sent and when the last one returned.
func applyDeployments(b *testing.B, env *controlplanetest.Env) (first, last time.Time) {
	var next atomic.Int64
	var wg sync.WaitGroup
	first = time.Now()
	for range benchApplyConns {
		cfg := rest.CopyConfig(env.Config)
		cfg.Dial = (&net.Dialer{}).DialContext
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			b.Fatal(err)
		}
		wg.Go(func() {
			for {
				n := next.Add(1)
				if n > benchDeployments {
					return
				}
				d := benchDeployment(fmt.Sprintf("bench-%03d", n), benchReplicas)
				if _, err := cs.AppsV1().Deployments("default").Create(context.Background(), d, metav1.CreateOptions{}); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	return first, time.Now()
}

// podCounter counts ADDED pod events on the log, read by an ordered
// consumer (no load on the apiserver).
type podCounter struct {
	added atomic.Int64
	mu    sync.Mutex
	last  time.Time // arrival of the latest ADDED event
}

func countAddedPods(b *testing.B, js jetstream.JetStream) *podCounter {
	ctx := context.Background()
	c, err := js.OrderedConsumer(ctx, events.Stream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{events.Filter("", "pods", "", "", "")},
		DeliverPolicy:  jetstream.DeliverNewPolicy,
	})
	if err != nil {
		b.Fatal(err)
	}
	p := &podCounter{}
	cc, err := c.Consume(func(m jetstream.Msg) {
		if m.Headers().Get(events.MsgHeaderType) != string(events.Added) {
			return
		}
		now := time.Now()
		p.mu.Lock()
		p.last = now
		p.mu.Unlock()
		p.added.Add(1)
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(cc.Stop)
	return p
}

// wait returns when want pods were added (the arrival of the last one), or
// false after timeout.
func (p *podCounter) wait(want int64, timeout time.Duration) (time.Time, bool) {
	deadline := time.Now().Add(timeout)
	for p.added.Load() < want {
		if time.Now().After(deadline) {
			return time.Time{}, false
		}
		time.Sleep(20 * time.Millisecond)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.last, true
}

// reportShort logs the deployments that did not get all their pods, with
// their ReplicaSets, to tell a stuck controller from a slow one.
func reportShort(b *testing.B, env *controlplanetest.Env) {
	ctx := context.Background()
	pods := map[string]int{}
	opts := metav1.ListOptions{Limit: 1000}
	for {
		l, err := env.Client.CoreV1().Pods("default").List(ctx, opts)
		if err != nil {
			b.Logf("list pods: %v", err)
			return
		}
		for _, p := range l.Items {
			pods[p.Labels["app"]]++
		}
		if opts.Continue = l.Continue; opts.Continue == "" {
			break
		}
	}
	rsets, err := env.Client.AppsV1().ReplicaSets("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		b.Logf("list replicasets: %v", err)
		return
	}
	deps, err := env.Client.AppsV1().Deployments("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		b.Logf("list deployments: %v", err)
		return
	}
	for _, d := range deps.Items {
		app := d.Spec.Selector.MatchLabels["app"]
		if pods[app] >= int(*d.Spec.Replicas) {
			continue
		}
		b.Logf("short: deployment %s gen %d observed %d status %+v: %d pods", d.Name, d.Generation, d.Status.ObservedGeneration, d.Status, pods[app])
		for _, rs := range rsets.Items {
			if rs.Labels["app"] == app {
				b.Logf("  replicaset %s rv %s spec %d status %+v", rs.Name, rs.ResourceVersion, *rs.Spec.Replicas, rs.Status)
			}
		}
	}
}
