package e2etest

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/events/consumer"
	"github.com/cairn-dev/cairn/services/cairn/cairntest"
	"github.com/cairn-dev/cairn/services/controllers/manager"
	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
	"github.com/cairn-dev/cairn/services/embedded/embeddedtest"
	"github.com/cairn-dev/cairn/services/kubelet"
	"github.com/cairn-dev/cairn/services/kubelet/node/nodetest"
	"github.com/cairn-dev/cairn/services/procstat"
	"github.com/cairn-dev/cairn/services/scheduler"
)

// BenchmarkKubeletRealNode creates 30 pods at once on the one real node of
// a `cairn up` (scheduler, kubelet, containerd through CRI, CNI) and
// measures pod start-up latency as Kubernetes' SLO does: from the pod's
// creation to the status write that makes it Running. Creation is when
// the create request was sent, Running when the watch delivered that
// status (both seen by this process, so neither clock skew nor the
// one-second creationTimestamp blurs it). BENCH_REAL_PODS changes the count.
func BenchmarkKubeletRealNode(b *testing.B) {
	n := envInt("BENCH_REAL_PODS", 30)
	c, client := startRealNodeBench(b)
	ctx := context.Background()
	var all []time.Duration
	var stageAll [len(stages)][]time.Duration
	var cairnCPU, nodeCPU time.Duration
	b.ResetTimer()
	for iter := range b.N {
		b.StopTimer()
		prefix := fmt.Sprintf("bench-%d-", iter)
		w, err := client.CoreV1().Pods("default").Watch(ctx, metav1.ListOptions{})
		if err != nil {
			b.Fatal(err)
		}
		var mu sync.Mutex
		created := map[string]time.Time{}
		running := map[string]time.Time{}
		started := map[string]time.Time{}   // the container's startedAt (1 s resolution)
		scheduled := map[string]time.Time{} // PodScheduled's lastTransitionTime (1 s resolution)
		allRunning := make(chan struct{})
		go func() {
			for ev := range w.ResultChan() {
				p, ok := ev.Object.(*corev1.Pod)
				if !ok || ev.Type == watch.Deleted || p.Status.Phase != corev1.PodRunning {
					continue
				}
				now := time.Now()
				mu.Lock()
				if _, seen := running[p.Name]; !seen && len(p.Name) > len(prefix) && p.Name[:len(prefix)] == prefix {
					running[p.Name] = now
					for _, cond := range p.Status.Conditions {
						if cond.Type == corev1.PodScheduled {
							scheduled[p.Name] = cond.LastTransitionTime.Time
						}
					}
					if cs := p.Status.ContainerStatuses; len(cs) == 1 && cs[0].State.Running != nil {
						started[p.Name] = cs[0].State.Running.StartedAt.Time
					}
					if len(running) == n {
						close(allRunning)
					}
				}
				mu.Unlock()
			}
		}()
		cairn0, node0 := benchCPU(b, c)
		b.StartTimer()
		start := time.Now()
		var wg sync.WaitGroup
		for i := range n {
			name := fmt.Sprintf("%s%d", prefix, i)
			wg.Go(func() {
				mu.Lock()
				created[name] = time.Now()
				mu.Unlock()
				if _, err := client.CoreV1().Pods("default").Create(ctx, sleepPod(name), metav1.CreateOptions{}); err != nil {
					b.Error(err)
				}
			})
		}
		wg.Wait()
		select {
		case <-allRunning:
		case <-time.After(3 * time.Minute):
			mu.Lock()
			b.Fatalf("%d/%d pods Running after 3m", len(running), n)
		}
		took := time.Since(start)
		b.StopTimer()
		cairn1, node1 := benchCPU(b, c)
		cairnCPU += cairn1 - cairn0
		nodeCPU += node1 - node0
		w.Stop()
		mu.Lock()
		var lat, toStart, toSched []time.Duration
		for name, at := range running {
			lat = append(lat, at.Sub(created[name]))
			toStart = append(toStart, started[name].Sub(created[name]).Truncate(time.Second))
			toSched = append(toSched, scheduled[name].Sub(created[name]).Truncate(time.Second))
		}
		mu.Unlock()
		all = append(all, lat...)
		st := podStages(ctx, b, client, prefix, n, created, running)
		for i := range stages {
			stageAll[i] = append(stageAll[i], st[i]...)
		}
		b.Logf("iteration %d: stages p50/p99: %s", iter, stageSummary(st))
		b.Logf("iteration %d: %d pods Running in %v; p50 %v p99 %v (after creation, 1 s resolution: scheduled p50 %v p99 %v, container startedAt p50 %v p99 %v)",
			iter, n, took.Round(time.Millisecond), quantile(lat, 0.5), quantile(lat, 0.99),
			quantile(toSched, 0.5), quantile(toSched, 0.99), quantile(toStart, 0.5), quantile(toStart, 0.99))
		if err := client.CoreV1().Pods("default").DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
			b.Fatal(err)
		}
		poll(b, 2*time.Minute, "benchmark pods deleted", func() error {
			l, err := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
			if err != nil {
				return err
			}
			if len(l.Items) > 0 {
				return fmt.Errorf("%d pods left", len(l.Items))
			}
			return nil
		})
	}
	b.ReportMetric(float64(quantile(all, 0.5).Milliseconds()), "p50-ms")
	b.ReportMetric(float64(quantile(all, 0.99).Milliseconds()), "p99-ms")
	for i, name := range stages {
		b.ReportMetric(float64(quantile(stageAll[i], 0.5).Milliseconds()), name+"-p50-ms")
	}
	b.Logf("stages p50/p99 over all rounds: %s", stageSummary(stageAll))
	perPod := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / float64(n*b.N) }
	b.ReportMetric(perPod(cairnCPU), "cairn-cpu-ms/pod")
	b.ReportMetric(perPod(nodeCPU), "node-cpu-ms/pod")
	b.Logf("%d pods at once on one real node, %d rounds: start-up latency p50 %v p99 %v max %v (target p99 < 3s; load %s)",
		n, b.N, quantile(all, 0.5), quantile(all, 0.99), quantile(all, 1), loadavg())
	c.stop(b)
}

// benchCPU is the processor time used so far by the `cairn up` process
// itself (etcd, NATS, the control plane and the kubelet; containerd is its
// child but still running, so not in it) and by the node's containerd
// tree (nodetest.CPU): while pods start, what else runs on the machine
// changes neither.
func benchCPU(b *testing.B, c *cluster) (cairn, node time.Duration) {
	b.Helper()
	st, err := procstat.Read(c.Pid())
	if err != nil {
		b.Fatal(err)
	}
	cairn = st.CPU()
	dir := filepath.Join(c.DataDir, "node")
	pid, err := os.ReadFile(filepath.Join(dir, "containerd.pid"))
	if err != nil {
		b.Fatal(err)
	}
	p, err := strconv.Atoi(strings.TrimSpace(string(pid)))
	if err != nil {
		b.Fatal(err)
	}
	return cairn, nodetest.CPU(b, p, filepath.Join(dir, "containerd.sock"))
}

// stages split a pod's start-up by the Events written on the way, each
// timed to the microsecond (the scheduler's eventTime; the kubelet's Event
// names end in the UnixNano of when it recorded them): schedule (creation
// to Scheduled), sandbox (to Pulled: the kubelet picks the pod up, writes
// Pending, sets up volumes and runs the sandbox, CNI included, then finds
// the image present), create (to Created: CreateContainer), start (to
// Started: StartContainer) and report (to the Running status arriving on
// this process's watch).
var stages = [...]string{"schedule", "sandbox", "create", "start", "report"}

// podStages lists the Events of the round's pods (waiting up to 10 s for
// the kubelet's recorder to write the last of them) and returns the
// duration of each stage, by stage, of the pods all of whose Events were
// found.
func podStages(ctx context.Context, b *testing.B, client kubernetes.Interface, prefix string, n int, created, running map[string]time.Time) [len(stages)][]time.Duration {
	b.Helper()
	reasons := map[string]int{"Scheduled": 0, "Pulled": 1, "Created": 2, "Started": 3}
	var at map[string]*[4]time.Time
	complete := 0
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		l, err := client.CoreV1().Events("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			b.Fatal(err)
		}
		at = map[string]*[4]time.Time{}
		for _, ev := range l.Items {
			i, ok := reasons[ev.Reason]
			pod := ev.InvolvedObject.Name
			if !ok || len(pod) <= len(prefix) || pod[:len(prefix)] != prefix {
				continue
			}
			t := ev.EventTime.Time
			if t.IsZero() {
				j := strings.LastIndexByte(ev.Name, '.')
				ns, err := strconv.ParseInt(ev.Name[j+1:], 16, 64)
				if j < 0 || err != nil {
					continue
				}
				t = time.Unix(0, ns)
			}
			if at[pod] == nil {
				at[pod] = &[4]time.Time{}
			}
			at[pod][i] = t
		}
		complete = 0
		for _, ts := range at {
			if !slices.ContainsFunc(ts[:], time.Time.IsZero) {
				complete++
			}
		}
		if complete == n || time.Now().After(deadline) {
			break
		}
	}
	if complete < n {
		b.Logf("stages: Events of only %d/%d pods found", complete, n)
	}
	var out [len(stages)][]time.Duration
	for pod, ts := range at {
		if slices.ContainsFunc(ts[:], time.Time.IsZero) {
			continue
		}
		marks := []time.Time{created[pod], ts[0], ts[1], ts[2], ts[3], running[pod]}
		for i := range stages {
			out[i] = append(out[i], marks[i+1].Sub(marks[i]))
		}
	}
	return out
}

// stageSummary prints each stage's p50/p99 in milliseconds.
func stageSummary(st [len(stages)][]time.Duration) string {
	var parts []string
	for i, name := range stages {
		parts = append(parts, fmt.Sprintf("%s %d/%d", name, quantile(st[i], 0.5).Milliseconds(), quantile(st[i], 0.99).Milliseconds()))
	}
	return strings.Join(parts, ", ") + " ms"
}

// sleepPod is a pod that sleeps, with a small request and a short grace
// period.
func sleepPod(name string) *corev1.Pod {
	grace := int64(1)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "bench"}},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{{
				Name: "sleep", Image: "cairn.local/busybox:1.36", ImagePullPolicy: corev1.PullIfNotPresent,
				Command: []string{"sleep", "3600"},
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("8Mi")}},
			}},
		},
	}
}

// BenchmarkKubeletHollow runs 1,000 hollow nodes (kubelet.NewHollow), the
// real controller-manager and scheduler on an in-process control plane,
// applies 100 Deployments of 100 replicas and measures the time until all
// 10,000 pods are Running, the rate, and the start-up latency of each pod
// (the commit time of its creation to the commit time of the status write
// that makes it Running, both read from the log). It also measures the raw
// etcd put rate of this machine (embeddedtest.PutRate) as a baseline.
// BENCH_HOLLOW_NODES, BENCH_DEPLOYMENTS and BENCH_REPLICAS change the size.
func BenchmarkKubeletHollow(b *testing.B) {
	nodes := envInt("BENCH_HOLLOW_NODES", 1000)
	deployments, replicas := envInt("BENCH_DEPLOYMENTS", 100), envInt("BENCH_REPLICAS", 100)
	pods := deployments * replicas
	for range b.N {
		benchHollow(b, nodes, deployments, replicas)
	}
	b.StopTimer()
	etcd := embeddedtest.PutRate(b, int64(pods), 64, 1024)
	b.ReportMetric(etcd, "etcd-puts/s")
	b.Logf("raw etcd: %.0f puts/s (load %s)", etcd, loadavg())
	if lastRate > 0 {
		b.ReportMetric(lastRate/etcd, "ratio")
		b.Logf("pods/s over etcd puts/s: %.3f", lastRate/etcd)
	}
}

var lastRate float64

func benchHollow(b *testing.B, nodes, deployments, replicas int) {
	b.StopTimer()
	pods := deployments * replicas
	env := controlplanetest.Start(b)
	ctx := context.Background()
	log := controlplanetest.Logger("E2E_BENCH_LOG")
	setup := time.Now()
	startHollowCluster(b, env, nodes, log)

	// Every pod's creation and first Running, as committed on the log.
	var mu sync.Mutex
	created := map[string]time.Time{}
	running := map[string]time.Time{}
	bound := map[string]time.Time{}
	var lastCreated, lastBound time.Time
	done := make(chan struct{})
	evTime := func(ev *events.Event) time.Time {
		if ev == nil || ev.Time.IsZero() {
			return time.Now()
		}
		return ev.Time
	}
	cache, err := consumer.NewCache(consumer.CacheConfig[*corev1.Pod]{Resource: corev1.SchemeGroupVersion.WithResource("pods"),
		Config: env.Config, JS: env.JS})
	if err != nil {
		b.Fatal(err)
	}
	see := func(p *corev1.Pod, ev *events.Event) {
		mu.Lock()
		defer mu.Unlock()
		if _, ok := created[p.Name]; !ok {
			created[p.Name] = evTime(ev)
			if created[p.Name].After(lastCreated) {
				lastCreated = created[p.Name]
			}
		}
		if _, ok := bound[p.Name]; !ok && p.Spec.NodeName != "" {
			bound[p.Name] = evTime(ev)
			if bound[p.Name].After(lastBound) {
				lastBound = bound[p.Name]
			}
		}
		if p.Status.Phase == corev1.PodRunning {
			if _, ok := running[p.Name]; !ok {
				running[p.Name] = evTime(ev)
				if len(running) == pods {
					close(done)
				}
			}
		}
	}
	cache.AddHandler(consumer.Handler[*corev1.Pod]{
		OnAdd:    see,
		OnUpdate: func(_, p *corev1.Pod, ev *events.Event) { see(p, ev) },
	})
	controlplanetest.Run(b, cache)
	if err := cache.WaitForSync(ctx); err != nil {
		b.Fatal(err)
	}
	b.Logf("%d hollow nodes, controller-manager and scheduler ready in %v", nodes, time.Since(setup).Round(time.Millisecond))

	churn0, err := controlplanetest.ReadChurn(env.Metrics)
	if err != nil {
		b.Fatal(err)
	}
	b.StartTimer()
	start := time.Now()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i := range deployments {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if _, err := env.Client.AppsV1().Deployments("default").Create(ctx, hollowDeployment(fmt.Sprintf("d-%d", i), int32(replicas)), metav1.CreateOptions{}); err != nil {
				b.Error(err)
			}
		})
	}
	wg.Wait()
	applied := time.Since(start)
	select {
	case <-done:
	case <-time.After(15 * time.Minute):
		mu.Lock()
		b.Fatalf("%d/%d pods created, %d Running after 15m", len(created), pods, len(running))
	}
	took := time.Since(start)
	b.StopTimer()
	if churn, err := controlplanetest.ReadChurn(env.Metrics); err == nil {
		d := churn.Sub(churn0)
		p99, _ := d.LagQuantile(0.99)
		b.ReportMetric(d.PublisherTermsLost, "publisher-terms-lost")
		b.ReportMetric(d.PartitionsLost+d.PartitionsReleased, "partition-moves")
		b.ReportMetric(p99, "publish-lag-p99-s")
		b.Logf("churn during the run: %v", d)
	}

	mu.Lock()
	var lat, toBind []time.Duration
	for name, at := range running {
		lat = append(lat, at.Sub(created[name]))
		toBind = append(toBind, bound[name].Sub(created[name]))
	}
	b.Logf("the last pod created %v after the first apply, the last bound %v after; creation to binding p50 %v p99 %v",
		lastCreated.Sub(start).Round(time.Millisecond), lastBound.Sub(start).Round(time.Millisecond), quantile(toBind, 0.5), quantile(toBind, 0.99))
	mu.Unlock()
	rate := float64(pods) / took.Seconds()
	lastRate = rate
	b.ReportMetric(took.Seconds(), "s-all-running")
	b.ReportMetric(rate, "pods/s")
	b.ReportMetric(float64(quantile(lat, 0.5).Milliseconds()), "p50-ms")
	b.ReportMetric(float64(quantile(lat, 0.99).Milliseconds()), "p99-ms")
	b.Logf("%d hollow nodes, %d deployments x %d: applied in %v, all %d Running after %v (%.0f pods/s); start-up latency p50 %v p99 %v max %v (load %s)",
		nodes, deployments, replicas, applied.Round(time.Millisecond), pods, took.Round(time.Millisecond), rate,
		quantile(lat, 0.5), quantile(lat, 0.99), quantile(lat, 1), loadavg())
}

// startHollowCluster runs nodes hollow nodes (h-0..), the controller-manager
// and the scheduler on env, and waits for the nodes to register.
func startHollowCluster(b *testing.B, env *controlplanetest.Env, nodes int, log *slog.Logger, cfg ...func(*manager.Config)) {
	ctx := context.Background()
	ks, err := kubelet.NewHollow(kubelet.HollowConfig{RestConfig: env.Config, JS: env.JS, Nodes: nodes, NamePrefix: "h-", Log: log})
	if err != nil {
		b.Fatal(err)
	}
	for _, k := range ks {
		controlplanetest.Run(b, k)
	}
	for _, k := range ks {
		if err := k.Pods().WaitForSync(ctx); err != nil {
			b.Fatal(err)
		}
	}
	poll(b, 5*time.Minute, "hollow nodes registered", func() error {
		l, err := env.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		if len(l.Items) != nodes {
			return fmt.Errorf("%d/%d nodes", len(l.Items), nodes)
		}
		return nil
	})
	mc := manager.Config{RestConfig: env.ConfigFor(controlplanetest.ControllerToken), JS: env.JS, Metrics: env.Metrics, Log: log}
	for _, f := range cfg {
		f(&mc)
	}
	m, err := manager.New(mc)
	if err != nil {
		b.Fatal(err)
	}
	controlplanetest.Run(b, m)
	s, err := scheduler.New(scheduler.Config{RestConfig: env.ConfigFor(controlplanetest.SchedulerToken), JS: env.JS, Log: log})
	if err != nil {
		b.Fatal(err)
	}
	controlplanetest.Run(b, s)
}

func hollowDeployment(name string, replicas int32) *appsv1.Deployment {
	return controlplanetest.Deployment("", name, replicas, corev1.Container{Name: "c", Image: "cairn.local/busybox:1.36",
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("8Mi")}}})
}

// quantile returns the q-quantile of d (sorted in place); 0 when empty.
func quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return d[int(q*float64(len(d)-1))]
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// loadavg is the 1, 5 and 15 minute load average, for the record.
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil || len(b) < 14 {
		return "?"
	}
	f := string(b)
	for i, n := 0, 0; i < len(f); i++ {
		if f[i] == ' ' {
			if n++; n == 3 {
				return f[:i]
			}
		}
	}
	return f
}

// startRealNodeBench starts a cairn up with its real node for a benchmark
// and a client of it without client-side rate limits (QPS and burst 1000).
func startRealNodeBench(b *testing.B) (*cluster, kubernetes.Interface) {
	b.Helper()
	kubectl := requireNode(b)
	bin := cairntest.Build(b)
	c := startCluster(b, bin, kubectl, b.TempDir(), cairntest.FreeAddr(b))
	rc, err := clientcmd.BuildConfigFromFlags("", c.Up.Kubeconfig())
	if err != nil {
		b.Fatal(err)
	}
	rc.QPS, rc.Burst = 1000, 1000
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		b.Fatal(err)
	}
	return c, client
}
