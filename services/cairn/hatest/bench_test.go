package hatest

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/cairn-dev/cairn/services/cairn/cairntest"
	"github.com/cairn-dev/cairn/services/pki/jointoken"
)

// BenchmarkHA (go tool task bench:ha) measures, in one run, ConfigMap
// creates through one `cairn up` and then through three servers joined
// into one cluster (the clients spread over the three apiservers; the
// streams at 3 replicas, etcd of three voters): creates/s and p50/p99 of
// the same load, the three servers' rate as a ratio of the one's. Then it
// SIGKILLs the server holding the log's publisher and, once that one is
// restarted and the cluster whole, the etcd leader's server, and reports
// for each how long until a write through another server is accepted
// again, until the log publishes again (a watch through another server,
// served from the log, delivers a write made after the kill), and until
// no shard partition is left to the killed server's replicas. CAIRN_HA_CREATES (3000) and
// CAIRN_HA_CLIENTS (32) set the load.
func BenchmarkHA(b *testing.B) {
	creates, clients := envInt(b, "CAIRN_HA_CREATES", 3000), envInt(b, "CAIRN_HA_CLIENTS", 32)
	bin := cairntest.Build(b)
	api, ports := clusterPorts(b)
	root := b.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	start := func(s *server, extra ...string) {
		b.Helper()
		startServer(b, ctx, bin, s, append(ports, extra...))
	}

	// One server, as `cairn up` runs by default.
	one := &server{addr: net.JoinHostPort("127.0.0.6", api), dir: filepath.Join(root, "one")}
	start(one)
	single := load(b, ctx, []kubernetes.Interface{benchClient(b, one)}, "one", creates, clients)
	one.up.Stop(b, syscall.SIGTERM)

	// Three servers of one cluster.
	servers := make([]*server, 3)
	for i := range servers {
		servers[i] = &server{addr: net.JoinHostPort(fmt.Sprintf("127.0.0.%d", i+2), api), dir: filepath.Join(root, fmt.Sprintf("s%d", i+1))}
	}
	start(servers[0], "--cluster-init")
	tok, err := jointoken.Read(servers[0].dir)
	if err != nil {
		b.Fatal(err)
	}
	for _, s := range servers[1:] {
		start(s, "--join", "https://"+servers[0].addr, "--join-token", tok.String())
	}
	names := serverNames(b, servers)
	var st string
	waitStatus(b, bin, servers[0].dir, 3*time.Minute, func(s string) error {
		st = s
		if n := strings.Count(s, " started "); n != 3 {
			return fmt.Errorf("%d started etcd members, want 3", n)
		}
		for _, stream := range []string{"CAIRN ", "CAIRN_LEASES "} {
			if !hasLine(s, stream, "3") {
				return fmt.Errorf("stream %snot at 3 replicas", stream)
			}
		}
		if publisherOf(s) == "" {
			return fmt.Errorf("no publisher")
		}
		return nil
	})
	var cs []kubernetes.Interface
	for _, s := range servers {
		cs = append(cs, benchClient(b, s))
	}
	three := load(b, ctx, cs, "three", creates, clients)
	b.ReportMetric(single.rate, "creates/s-one")
	b.ReportMetric(three.rate, "creates/s-three")
	b.ReportMetric(three.rate/single.rate, "three/one")
	b.Logf("one server: %s", single)
	b.Logf("three servers: %s; ratio %.2f", three, three.rate/single.rate)

	// SIGKILL the publisher's server, then (restarted, the cluster whole
	// again) the etcd leader's; time writes, the log and the partitions
	// through another one.
	pub := publisherOf(st)
	f := failover(b, ctx, bin, servers, names, cs, "publisher's", pub, "1")
	start(servers[f])
	waitStatus(b, bin, servers[(f+1)%3].dir, 3*time.Minute, func(s string) error {
		st = s
		if n := strings.Count(s, " started "); n != 3 {
			return fmt.Errorf("%d started etcd members, want 3", n)
		}
		if publisherOf(s) == "" || etcdLeaderOf(s) == "" {
			return fmt.Errorf("no publisher or no etcd leader")
		}
		return nil
	})
	failover(b, ctx, bin, servers, names, cs, "etcd leader's", etcdLeaderOf(st), "2")
}

// failover SIGKILLs the server named victim (the role's holder) and
// reports, from the kill: a write through the next server accepted again,
// the log published again (a watch through it, served from the log,
// delivers a write made after the kill), and no shard partition left to
// the victim's controller-manager or scheduler. It returns the victim's
// index.
func failover(b *testing.B, ctx context.Context, bin string, servers []*server, names []string, cs []kubernetes.Interface, role, victimName, suffix string) int {
	b.Helper()
	victim := -1
	for i, n := range names {
		if n == victimName {
			victim = i
		}
	}
	if victim < 0 {
		b.Fatalf("the %s server %q is none of the servers %v", role, victimName, names)
	}
	other := (victim + 1) % 3
	oc := cs[other]
	w, err := oc.CoreV1().ConfigMaps("default").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Stop()
	prefix := "after-kill-" + suffix + "-"
	killed := time.Now()
	servers[victim].up.Stop(b, syscall.SIGKILL)
	var accepted time.Duration
	for i := 0; ; i++ {
		cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := oc.CoreV1().ConfigMaps("default").Create(cctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s%d", prefix, i), Namespace: "default"}}, metav1.CreateOptions{})
		ccancel()
		if err == nil {
			accepted = time.Since(killed)
			break
		}
		if time.Since(killed) > 3*time.Minute {
			b.Fatalf("no write accepted through %s 3 minutes after the %s server was killed: %v", servers[other].addr, role, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	var published time.Duration
	for published == 0 {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				b.Fatal("the watch through another server ended")
			}
			if cm, isCM := ev.Object.(*corev1.ConfigMap); isCM && ev.Type == watch.Added && strings.HasPrefix(cm.Name, prefix) {
				published = time.Since(killed)
			}
		case <-time.After(3 * time.Minute):
			b.Fatal("no watch event for a write after the kill within 3 minutes")
		}
	}
	var moved time.Duration
	for moved == 0 {
		r := cairntest.Run(b, time.Minute, bin, "cluster", "status", "--data-dir", servers[other].dir)
		if r.Err == nil && !ownsPartitions(r.Stdout, victimName) {
			moved = time.Since(killed)
			break
		}
		if time.Since(killed) > 3*time.Minute {
			b.Fatalf("partitions still owned by %s 3 minutes after the kill (%v):\n%s", victimName, r.Err, r.Stdout)
		}
		time.Sleep(500 * time.Millisecond)
	}
	b.ReportMetric(accepted.Seconds(), "s-writes-again-"+suffix)
	b.ReportMetric(published.Seconds(), "s-log-again-"+suffix)
	b.ReportMetric(moved.Seconds(), "s-partitions-moved-"+suffix)
	b.Logf("%s server (%s) SIGKILLed: writes accepted again after %v, log published again (watch event) after %v, partitions moved after %v",
		role, victimName, accepted.Round(10*time.Millisecond), published.Round(10*time.Millisecond), moved.Round(10*time.Millisecond))
	return victim
}

// etcdLeaderOf is the leading member's name in cluster status' ETCD
// MEMBER table (NAME PEER-URLS CLIENT-URLS STATE LEADER REVISION).
func etcdLeaderOf(status string) string {
	for _, f := range tableRows(status, "ETCD MEMBER") {
		if len(f) >= 6 && f[3] == "started" && f[4] == "true" {
			return f[0]
		}
	}
	return ""
}

// ownsPartitions: cluster status' SHARD GROUP table (GROUP OWNER N: P,...)
// has an owner whose identity has id in it (a server's replicas name
// themselves after it).
func ownsPartitions(status, id string) bool {
	for _, f := range tableRows(status, "SHARD GROUP") {
		if len(f) >= 3 && strings.Contains(f[1], id) {
			return true
		}
	}
	return false
}

// loadResult is one load's rate and latencies.
type loadResult struct {
	n             int
	took          time.Duration
	rate          float64
	p50, p99, max time.Duration
}

func (r loadResult) String() string {
	return fmt.Sprintf("%d creates in %v: %.0f/s, p50 %v p99 %v max %v", r.n, r.took.Round(time.Millisecond), r.rate,
		r.p50.Round(100*time.Microsecond), r.p99.Round(100*time.Microsecond), r.max.Round(time.Millisecond))
}

// load creates n ConfigMaps named prefix-i with workers goroutines, worker
// w through cs[w%len(cs)].
func load(b *testing.B, ctx context.Context, cs []kubernetes.Interface, prefix string, n, workers int) loadResult {
	b.Helper()
	next := make(chan int, n)
	for i := range n {
		next <- i
	}
	close(next)
	lat := make([][]time.Duration, workers)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	start := time.Now()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := cs[w%len(cs)]
			for i := range next {
				t0 := time.Now()
				_, err := c.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{
					ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", prefix, i), Namespace: "default"},
					Data:       map[string]string{"k": strings.Repeat("v", 256)}}, metav1.CreateOptions{})
				if err != nil {
					errs <- err
					return
				}
				lat[w] = append(lat[w], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	close(errs)
	if err := <-errs; err != nil {
		b.Fatalf("create (%s): %v", prefix, err)
	}
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	return loadResult{n: n, took: took, rate: float64(n) / took.Seconds(),
		p50: all[len(all)/2], p99: all[len(all)*99/100], max: all[len(all)-1]}
}

// benchClient is an unthrottled client of s's apiserver.
func benchClient(b *testing.B, s *server) kubernetes.Interface {
	b.Helper()
	rc, err := clientcmd.BuildConfigFromFlags("", s.up.Kubeconfig())
	if err != nil {
		b.Fatal(err)
	}
	rc.QPS, rc.Burst = -1, -1
	return kubernetes.NewForConfigOrDie(rc)
}

// publisherOf is the identity on cluster status' "log publisher:" line.
func publisherOf(status string) string {
	for _, l := range strings.Split(status, "\n") {
		if rest, ok := strings.CutPrefix(l, "log publisher:"); ok {
			id, _, _ := strings.Cut(strings.TrimSpace(rest), ",")
			if strings.HasPrefix(id, "(none") {
				return ""
			}
			return id
		}
	}
	return ""
}

func envInt(b *testing.B, name string, def int) int {
	b.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	var n int
	if _, err := fmt.Sscan(v, &n); err != nil || n <= 0 {
		b.Fatalf("%s=%q: want a positive number", name, v)
	}
	return n
}
