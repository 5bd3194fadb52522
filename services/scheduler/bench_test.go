package scheduler

import (
	"context"
	"fmt"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/events/consumer"
	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
	"github.com/cairn-dev/cairn/services/embedded/embeddedtest"
)

// Sizes of the scheduler benchmarks (kube's scheduler_perf
// SchedulingBasic 5000Nodes_10000Pods).
const (
	benchNodes   = 5000
	benchPods    = 10000
	benchWriters = 32
)

// BenchmarkScheduler runs one scheduler replica against a durable control
// plane (BENCH_NOFSYNC=1 turns fsync off) holding 5,000 Node objects (no
// kubelets), creates 10,000 pods with 32 concurrent clients and waits
// until all are bound; then the same with every pod carrying required
// pod anti-affinity per host and a DoNotSchedule zone spread constraint
// (100 groups of 100 pods). Run it with -benchtime=1x (go tool task
// bench:scheduler). Times come from the log (the apiserver's commit time of
// each pod's creation and of its binding). It reports:
//
//	pods/s           10,000 / (first creation .. last binding)
//	creates/s        10,000 / (first creation .. last creation): the offered load
//	p50-ms, p99-ms   scheduling latency, creation to binding commit
//	etcd-puts/s      raw etcd put rate in the same run (embeddedtest.PutRate)
//	ratio            pods/s divided by etcd-puts/s
//	cycle-µs         mean time of a scheduling decision
//	bind-ms          mean time of a binding request
//	cpu-ms/pod       CPU time of the whole process (apiserver, etcd, NATS,
//	                 scheduler, the creating clients) per pod: unlike the
//	                 rates, it hardly depends on what else runs on the machine
//	events           Events written by the time the last pod was bound
//	                 (BENCH_EVENT_QPS sets Config.EventQPS; -1: unlimited)
//
// BasicBacklog creates the 10,000 plain pods before the replica starts: its
// pods/s (10,000 / first .. last binding) is the rate of the scheduler and
// of the binding path alone, whatever the rate of creation (its latencies
// include the wait for the replica to start).
func BenchmarkScheduler(b *testing.B) {
	for _, tc := range []struct {
		name              string
		affinity, backlog bool
	}{{"Basic", false, false}, {"AntiAffinityTopologySpread", true, false}, {"BasicBacklog", false, true}} {
		b.Run(tc.name, func(b *testing.B) {
			for range b.N {
				benchScheduler(b, tc.affinity, tc.backlog)
			}
		})
	}
}

func benchScheduler(b *testing.B, affinity, backlog bool) {
	etcdRate := embeddedtest.PutRate(b, benchPods, benchWriters, 2048)
	env := controlplanetest.Start(b, controlplanetest.Options{Fsync: os.Getenv("BENCH_NOFSYNC") == "", TLS: os.Getenv("BENCH_HTTP") == ""})
	var nodes []*corev1.Node
	for i := range benchNodes {
		n := newNode(fmt.Sprintf("node-%04d", i), "4", "32Gi", 110)
		n.Labels[corev1.LabelTopologyZone] = fmt.Sprintf("zone-%d", i%10)
		nodes = append(nodes, n)
	}
	parallelDo(b, len(nodes), benchWriters, func(i int) error {
		_, err := env.Client.CoreV1().Nodes().Create(context.Background(), nodes[i], metav1.CreateOptions{})
		return err
	})
	pods := make([]*corev1.Pod, benchPods)
	for i := range pods {
		pods[i] = benchPod(i, affinity)
	}
	// The creators' own client, with an idle connection each (env.Client,
	// on http.DefaultTransport, would dial for most requests).
	creators, err := consumer.NewClientset(env.Config, benchCreators())
	if err != nil {
		b.Fatal(err)
	}
	create := func() {
		parallelDo(b, len(pods), benchCreators(), func(i int) error {
			_, err := creators.CoreV1().Pods("default").Create(context.Background(), pods[i], metav1.CreateOptions{})
			return err
		})
	}
	if backlog {
		create()
	}
	eventQPS, _ := strconv.ParseFloat(os.Getenv("BENCH_EVENT_QPS"), 32)
	cfg := Config{Log: controlplanetest.Logger("SCHED_BENCH_LOG"), Workers: benchBinders(), EventQPS: float32(eventQPS)}
	var s *Scheduler
	stopProfile := profileWindow(b)
	b.ResetTimer()
	cpu0 := embeddedtest.ProcessCPU()
	if backlog {
		s = startReplica(b, env, cfg)
	} else {
		s = startReplica(b, env, cfg)
		create()
	}
	eventually(b, 10*time.Minute, "all pods bound", func() bool { return s.Stats().Scheduled >= benchPods })
	b.StopTimer()
	cpu := embeddedtest.ProcessCPU() - cpu0
	stopProfile()
	rate, created, p50, p99 := benchFigures(b, env, backlog)
	b.ReportMetric(rate, "pods/s")
	b.ReportMetric(created, "creates/s")
	b.ReportMetric(p50, "p50-ms")
	b.ReportMetric(p99, "p99-ms")
	b.ReportMetric(etcdRate, "etcd-puts/s")
	b.ReportMetric(rate/etcdRate, "ratio")
	st := s.Stats()
	b.ReportMetric(float64(st.CycleTime.Microseconds())/float64(st.Attempts), "cycle-µs")
	b.ReportMetric(float64(st.BindTime.Milliseconds())/float64(st.Scheduled+st.Conflicts+st.Overcommits), "bind-ms")
	b.ReportMetric(float64(st.EventsWritten), "events")
	b.ReportMetric(float64(cpu.Microseconds())/1000/benchPods, "cpu-ms/pod")
}

func benchPod(i int, affinity bool) *corev1.Pod {
	p := newPod("default", fmt.Sprintf("pod-%05d", i), "100m", "500Mi")
	if !affinity {
		return p
	}
	app := fmt.Sprintf("app-%d", i%100)
	p.Labels["app"] = app
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}
	p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
		TopologyKey: corev1.LabelHostname, LabelSelector: sel}}}}
	p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone,
		WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: sel}}
	return p
}

// benchFigures reads the pods' creations and bindings from the log.
func benchFigures(b *testing.B, env *controlplanetest.Env, backlog bool) (rate, createRate, p50, p99 float64) {
	created, bound := map[string]time.Time{}, map[string]time.Time{}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	err := events.Tail(ctx, env.JS, events.TailOptions{Group: "core", Resource: "pods", Namespace: "default"}, func(ev *events.Event) error {
		if ev.Type == events.Added {
			created[ev.Name] = ev.Time
		} else if _, ok := bound[ev.Name]; !ok && ev.NodeName != "" {
			bound[ev.Name] = ev.Time
		}
		return nil
	})
	if err != nil || len(bound) != benchPods {
		b.Fatalf("log: %d bound, %v", len(bound), err)
	}
	var first, last, lastCreated, firstBound time.Time
	lat := make([]float64, 0, len(bound))
	for name, t := range bound {
		c := created[name]
		if first.IsZero() || c.Before(first) {
			first = c
		}
		if firstBound.IsZero() || t.Before(firstBound) {
			firstBound = t
		}
		if c.After(lastCreated) {
			lastCreated = c
		}
		if t.After(last) {
			last = t
		}
		lat = append(lat, float64(t.Sub(c))/float64(time.Millisecond))
	}
	slices.Sort(lat)
	createRate = float64(benchPods) / lastCreated.Sub(first).Seconds()
	if backlog {
		first = firstBound
	}
	return float64(benchPods) / last.Sub(first).Seconds(), createRate, lat[len(lat)/2], lat[len(lat)*99/100]
}

func parallelDo(b *testing.B, n, workers int, fn func(i int) error) {
	var wg sync.WaitGroup
	next := make(chan int)
	for range workers {
		wg.Go(func() {
			for i := range next {
				if err := fn(i); err != nil {
					b.Error(err)
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}

// benchCreators is the number of clients creating pods (BENCH_CREATORS,
// default 32).
func benchCreators() int {
	if n, _ := strconv.Atoi(os.Getenv("BENCH_CREATORS")); n > 0 {
		return n
	}
	return 32
}

// benchBinders is Config.Workers for the benchmark (BENCH_BINDERS).
func benchBinders() int {
	n, _ := strconv.Atoi(os.Getenv("BENCH_BINDERS"))
	return n
}

// profileWindow writes a CPU profile of the timed part of a run to the file
// BENCH_CPUPROFILE names (go test's -cpuprofile also covers the setup).
func profileWindow(b *testing.B) (stop func()) {
	path := os.Getenv("BENCH_CPUPROFILE")
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		b.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}
}
