package apitest

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/services/apiserver/storage"
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
//	lag-p99-ms                       commit (seen by an etcd watcher) to event received from the stream
//	write-lag-p99-ms                 the same from the write's start (WriteMeta.Time)
//	etcd-puts/s, ratio               raw etcd put rate and creates/s divided by it
//	cpu-us/create, cpu-us/put        CPU time of this process (clients included)
//	                                 per create and per raw put: less noisy than
//	                                 rates on a shared machine
//	dryrun-creates/s, cpu-us/dryrun  20,000 more creates with dryRun=All: the
//	                                 API layer (TLS, HTTP/2, authn, authz,
//	                                 admission, defaulting, validation, encoding)
//	                                 and the etcd read that checks the name is
//	                                 free; nothing written to etcd or the log
//	cpu-us/get, cpu-us/publish       baselines: a raw etcd read (1.5 KB, 64
//	                                 readers) and a JetStream publish of this
//	                                 run's mean event size, as the publisher
//	                                 publishes (see bench_floor_test.go)
//	cpu-us/txn, etcd-txns/s          the etcd transaction a create commits
//	                                 (storage.Store.Create: a compare, the
//	                                 object and its write metadata), alone,
//	                                 64 writers: CPU per transaction and rate
//	floor-ratio                      the ratio creates could reach on this
//	                                 machine if a create cost no more CPU than
//	                                 its API layer (dry run less the read), its
//	                                 etcd transaction and one publish: NumCPU
//	                                 over their sum, over the put rate. The
//	                                 publisher also reads each change from an
//	                                 etcd watch, and the watch hub reads the
//	                                 stream.
func BenchmarkAPICreatePods(b *testing.B) {
	for i := 0; i < b.N; i++ {
		cpu0 := embeddedtest.ProcessCPU()
		etcdRate := embeddedtest.PutRate(b, benchPods, benchClients, benchValue)
		putCPU := embeddedtest.ProcessCPU() - cpu0
		getUS := float64(getCPU(b, benchPods, benchClients).Nanoseconds()) / 1e3
		txn, txnRate := txnCPU(b, benchPods, benchClients)
		txnUS := float64(txn.Nanoseconds()) / 1e3
		env := controlplanetest.Start(b, controlplanetest.Options{Fsync: os.Getenv("BENCH_NOFSYNC") == "", TLS: os.Getenv("BENCH_HTTP") == ""})
		lag := startLagProbe(b, env)
		cpu1 := embeddedtest.ProcessCPU()
		creates, p50, p99, elapsed := createPods(b, env, false)
		lagP99, writeLagP99 := lag.p99(b, benchPods)
		createCPU := embeddedtest.ProcessCPU() - cpu1
		cpu2 := embeddedtest.ProcessCPU()
		dryRuns, _, _, dryElapsed := createPods(b, env, true)
		dryCPU := embeddedtest.ProcessCPU() - cpu2
		dryUS := float64(dryCPU.Microseconds()) / float64(dryRuns)
		putUS := float64(putCPU.Microseconds()) / benchPods
		pubUS := float64(publishCPU(b, benchPods, lag.meanSize()).Nanoseconds()) / 1e3
		floorUS := dryUS - getUS + txnUS + pubUS
		floorRatio := float64(runtime.NumCPU()) * 1e6 / floorUS / etcdRate
		b.ReportMetric(float64(dryRuns)/dryElapsed.Seconds(), "dryrun-creates/s")
		b.ReportMetric(dryUS, "cpu-us/dryrun")
		b.ReportMetric(getUS, "cpu-us/get")
		b.ReportMetric(txnUS, "cpu-us/txn")
		b.ReportMetric(txnRate, "etcd-txns/s")
		b.ReportMetric(pubUS, "cpu-us/publish")
		b.ReportMetric(floorRatio, "floor-ratio")
		b.ReportMetric(float64(createCPU.Microseconds())/float64(creates), "cpu-us/create")
		b.ReportMetric(putUS, "cpu-us/put")
		rate := float64(creates) / elapsed.Seconds()
		b.ReportMetric(rate, "creates/s")
		b.ReportMetric(float64(p50.Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(p99.Microseconds())/1000, "p99-ms")
		b.ReportMetric(float64(lagP99.Microseconds())/1000, "lag-p99-ms")
		b.ReportMetric(float64(writeLagP99.Microseconds())/1000, "write-lag-p99-ms")
		b.ReportMetric(etcdRate, "etcd-puts/s")
		b.ReportMetric(rate/etcdRate, "ratio")
		b.Logf("created %d pods in %v: %.0f creates/s (p50 %v, p99 %v); publish lag p99 %v from commit, %v from write start; raw etcd %.0f puts/s; ratio %.2f",
			creates, elapsed.Round(time.Millisecond), rate, p50, p99, lagP99, writeLagP99, etcdRate, rate/etcdRate)
		b.Logf("CPU per create %.0f µs; per dry-run create %.0f µs (%.0f/s), raw get %.0f µs, raw put %.0f µs, create's etcd txn %.0f µs (%.0f/s), publish %.0f µs: a floor of %.0f µs per create, ratio %.2f at most",
			float64(createCPU.Microseconds())/float64(creates), dryUS, float64(dryRuns)/dryElapsed.Seconds(), getUS, putUS, txnUS, txnRate, pubUS, floorUS, floorRatio)
	}
}

// createPods creates benchPods pods with benchClients clients, or with
// dryRun only asks for them to be created (dryRun=All: admitted and
// validated, not stored).
func createPods(b *testing.B, env *controlplanetest.Env, dryRun bool) (int, time.Duration, time.Duration, time.Duration) {
	return createPodsWith(b, env.Config, dryRun)
}

// createPodsWith is createPods by clients of base (its user, its server).
func createPodsWith(b *testing.B, base *rest.Config, dryRun bool) (int, time.Duration, time.Duration, time.Duration) {
	opts, prefix := metav1.CreateOptions{}, "bench"
	if dryRun {
		// Names of their own: a dry run of a taken name is a conflict.
		opts.DryRun, prefix = []string{metav1.DryRunAll}, "dry"
	}
	lat := make([]time.Duration, benchPods)
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < benchClients; w++ {
		// One connection per client, as 64 separate processes would have:
		// a custom Dial keeps client-go from sharing one cached transport.
		cfg := rest.CopyConfig(base)
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
					ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%06d", prefix, n), Labels: map[string]string{"app": "bench"}},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "busybox:1.36",
						Command: []string{"sleep", "3600"}}}},
				}
				t0 := time.Now()
				if _, err := cs.CoreV1().Pods("default").Create(context.Background(), pod, opts); err != nil {
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

// lagProbe measures the publish lag of every pod event: from the commit,
// as an etcd watcher of its own sees it (the earliest moment anything
// outside etcd can know of the commit; the publisher is such a watcher
// too), to the event's arrival at a JetStream consumer. It also records the
// lag from the write's WriteMeta.Time, taken by the apiserver before the
// write, which adds etcd's own commit latency.
type lagProbe struct {
	mu        sync.Mutex
	committed map[int64]time.Time // revision -> seen by the etcd watcher
	// arrivals are the events received from the stream, decoded only after
	// the run so that the probe takes little CPU from what it measures.
	arrivals []arrival
	cc       jetstream.ConsumeContext
}

type arrival struct {
	at   time.Time
	data []byte
}

func startLagProbe(b *testing.B, env *controlplanetest.Env) *lagProbe {
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	p := &lagProbe{committed: map[int64]time.Time{}}
	wch := env.Etcd.Watch(clientv3.WithRequireLeader(ctx), storage.Key("", "pods", "", ""), clientv3.WithPrefix())
	go func() {
		for resp := range wch {
			now := time.Now()
			p.mu.Lock()
			for _, ev := range resp.Events {
				p.committed[ev.Kv.ModRevision] = now
			}
			p.mu.Unlock()
		}
	}()
	c, err := env.JS.OrderedConsumer(ctx, events.Stream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{events.Filter("", "pods", "", "", "")},
		DeliverPolicy:  jetstream.DeliverNewPolicy,
	})
	if err != nil {
		b.Fatal(err)
	}
	p.cc, err = c.Consume(func(m jetstream.Msg) {
		now := time.Now()
		p.mu.Lock()
		p.arrivals = append(p.arrivals, arrival{at: now, data: m.Data()})
		p.mu.Unlock()
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(p.cc.Stop)
	return p
}

// p99 waits for want events and returns the p99 lag from the commit and
// from the write's start.
func (p *lagProbe) p99(b *testing.B, want int) (fromCommit, fromWrite time.Duration) {
	deadline := time.Now().Add(time.Minute)
	for {
		p.mu.Lock()
		n := len(p.arrivals)
		p.mu.Unlock()
		if n >= want || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.arrivals) < want {
		b.Errorf("only %d of %d events reached the stream", len(p.arrivals), want)
	}
	var lags, writeLags []time.Duration
	for _, a := range p.arrivals {
		var ev struct {
			Revision int64     `json:"revision"`
			Time     time.Time `json:"time"`
		}
		if err := json.Unmarshal(a.data, &ev); err != nil {
			b.Fatalf("event on the stream: %v", err)
		}
		writeLags = append(writeLags, a.at.Sub(ev.Time))
		c, ok := p.committed[ev.Revision]
		if !ok {
			b.Errorf("event at revision %d reached the stream but the etcd watcher never saw it", ev.Revision)
			continue
		}
		lags = append(lags, max(a.at.Sub(c), 0))
	}
	return pct99(lags), pct99(writeLags)
}

// meanSize is the mean size of the events received, in bytes.
func (p *lagProbe) meanSize() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.arrivals) == 0 {
		return 0
	}
	total := 0
	for _, a := range p.arrivals {
		total += len(a.data)
	}
	return total / len(p.arrivals)
}

func pct99(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	l := slices.Clone(d)
	slices.Sort(l)
	return l[len(l)*99/100]
}
