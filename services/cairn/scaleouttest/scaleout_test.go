package scaleouttest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/services/cairn/cairntest"
	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
	"github.com/cairn-dev/cairn/services/embedded/embeddedtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	ns          = "default"
	deployments = 50
	// converge is how long the Deployments get after the last change.
	converge = 90 * time.Second
)

// TestControllerManagerScaleOut runs three controller-manager replicas
// under a Deployment load, kills one and restarts another, and checks that
// every Deployment converges and that the log never shows a pod too many.
func TestControllerManagerScaleOut(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cairn and runs four processes; skipped with -short")
	}
	bin := cairntest.Build(t)
	etcd := embeddedtest.StartEtcd(t)
	nt := embeddedtest.StartNATS(t)
	js, err := jetstream.New(nt.Conn)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	addr := cairntest.FreeAddr(t)
	api := cairntest.NewProc(t, "apiserver", bin, "apiserver", "--etcd-endpoints", etcd.Endpoint(), "--nats-url", nt.URL(),
		"--listen", addr, "--insecure-http", "--token-auth-file", writeTokens(t, dir), "--log-level", "warn")
	api.Start()
	api.WaitHTTPReady("http://" + addr + "/readyz")
	markers := followLeases(t, js)

	kubeconfig := writeKubeconfig(t, dir, tokenProxy(t, addr, controllerTok), controllerTok)
	cms := make([]*cairntest.Proc, 3)
	for i := range cms {
		id := fmt.Sprintf("cm-%d", i)
		cms[i] = cairntest.NewProc(t, id, bin, "controller-manager", "--kubeconfig", kubeconfig, "--nats-url", nt.URL(),
			// A lease shorter than kube's 15 s: cm-1's keys move
			// sooner after its SIGKILL, the test's convergence stays
			// what it was before.
			"--identity", id, "--leader-elect-lease-duration", "6s", "--log-level", "warn")
		cms[i].Start()
	}

	admin := &rest.Config{Host: "http://" + addr, BearerToken: adminToken, QPS: -1, Burst: -1}
	client, err := kubernetes.NewForConfig(admin)
	if err != nil {
		t.Fatal(err)
	}
	defer client.CoreV1().RESTClient().(*rest.RESTClient).Client.CloseIdleConnections()
	stopKubelet := startKubelet(t, admin, js, client, ns, false)
	defer stopKubelet()
	stopBatchKubelet := startKubelet(t, admin, js, client, batchNS, true)
	defer stopBatchKubelet()

	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(1, seed))
	t.Logf("seed %d", seed)
	start := time.Now()
	names := createDeployments(t, client, rng)
	t.Logf("%d deployments created in %v", len(names), time.Since(start).Round(time.Millisecond))
	createBatch(t, client)

	// Waves of changes; cm-1 dies after the third, cm-2 restarts after the
	// sixth, each right after a wave so the controllers are busy.
	var changes []string
	for wave := 1; wave <= 8; wave++ {
		time.Sleep(time.Duration(1500+rng.IntN(1500)) * time.Millisecond)
		changes = append(changes, changeWave(t, client, rng, names, wave)...)
		switch wave {
		case 3:
			time.Sleep(time.Duration(rng.IntN(500)) * time.Millisecond)
			cms[1].Kill()
			t.Logf("cm-1 killed after wave %d (%v)", wave, time.Since(start).Round(time.Millisecond))
		case 6:
			time.Sleep(time.Duration(rng.IntN(500)) * time.Millisecond)
			cms[2].Interrupt(30 * time.Second)
			cms[2].Start()
			t.Logf("cm-2 restarted after wave %d (%v)", wave, time.Since(start).Round(time.Millisecond))
		}
	}
	last := time.Now()
	t.Logf("%d changes (%v); waiting for every deployment to converge", len(changes), time.Since(start).Round(time.Millisecond))

	waitConverged(t, client, names, converge)
	t.Logf("converged %v after the last change", time.Since(last).Round(time.Millisecond))
	waitBatch(t, client, 90*time.Second)
	t.Logf("jobs complete and the cronjob fired %v after the last change", time.Since(last).Round(time.Millisecond))
	for _, i := range []int{0, 2} {
		cms[i].Alive()
	}
	api.Alive()
	stopKubelet()
	stopBatchKubelet()

	// The log holds every write made so far once the publisher has caught
	// up with the last one.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	head := lastWrite(ctx, t, etcd)
	if err := events.WaitPublished(ctx, js, head); err != nil {
		t.Fatalf("wait for the log to reach revision %d: %v", head, err)
	}
	log := readLog(ctx, t, js)
	leaseRevs := markers.stop()
	problems, podAdds, rawOver, rsets, badDeps := checkLog(log, leaseRevs)
	for _, p := range problems {
		t.Error(p)
	}
	batchProblems, jobPods := checkBatch(log)
	for _, p := range batchProblems {
		t.Error(p)
	}
	t.Logf("%d pods created for %d Jobs and the CronJob's", jobPods, jobCount)
	for _, d := range badDeps[:min(len(badDeps), 2)] {
		t.Logf("history of %s:\n%s", d, timeline(log, d))
	}
	t.Logf("%d events on the log up to revision %d (and %d kube-system Lease events); %d pods created for %d ReplicaSets; after %d creates a Deployment briefly had more pods than spec.replicas+maxSurge while an old ReplicaSet's scale-down was under way",
		len(log), head, len(leaseRevs), podAdds, len(rsets), rawOver)
}

// leaseFollower records the id and revision of every kube-system Lease
// event as it is published. The lease stream keeps only each lease's
// latest event, but the reconciles that follow a controller manager's
// takeover name its marker Lease write as their cause, and the checker
// must place each cause on the log's timeline.
type leaseFollower struct {
	mu   sync.Mutex
	revs map[string]events.Revision
	once sync.Once
	end  func()
}

func followLeases(t *testing.T, js jetstream.JetStream) *leaseFollower {
	ctx, cancel := context.WithCancel(context.Background())
	f := &leaseFollower{revs: map[string]events.Revision{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		err := events.Tail(ctx, js, events.TailOptions{Group: "coordination.k8s.io", Resource: "leases", Namespace: "kube-system", Follow: true},
			func(ev *events.Event) error {
				f.mu.Lock()
				defer f.mu.Unlock()
				f.revs[ev.ID] = ev.Revision
				return nil
			})
		if err != nil && ctx.Err() == nil {
			t.Errorf("follow the lease stream: %v", err)
		}
	}()
	f.end = func() {
		cancel()
		<-done
	}
	t.Cleanup(func() { f.once.Do(f.end) })
	return f
}

// stop stops following and returns what was seen.
func (f *leaseFollower) stop() map[string]events.Revision {
	f.once.Do(f.end)
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.revs
}

// lastWrite is the revision of the last apiserver write.
func lastWrite(ctx context.Context, t *testing.T, etcd *embeddedtest.Etcd) events.Revision {
	t.Helper()
	resp, err := etcd.Client.Get(ctx, events.MetaKey)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) == 0 {
		t.Fatal("no apiserver write in etcd")
	}
	return events.Revision(resp.Kvs[0].ModRevision)
}

// createDeployments creates the Deployments, replicas 2 to 4, half with
// maxSurge 1 and maxUnavailable 0, half with the default strategy.
func createDeployments(t *testing.T, client kubernetes.Interface, rng *rand.Rand) []string {
	t.Helper()
	names := make([]string, deployments)
	reps := make([]int32, deployments)
	for i := range names {
		names[i] = fmt.Sprintf("web-%02d", i)
		reps[i] = int32(2 + rng.IntN(3))
	}
	parallel(t, names, func(i int, name string) error {
		d := deployment(name, reps[i], i%2 == 0)
		_, err := client.AppsV1().Deployments(ns).Create(context.Background(), d, metav1.CreateOptions{})
		return err
	})
	return names
}

func deployment(name string, replicas int32, surgeOne bool) *appsv1.Deployment {
	d := controlplanetest.Deployment(ns, name, replicas, corev1.Container{Name: "c", Image: "nginx:v0"})
	if surgeOne {
		s, u := intstr.FromInt32(1), intstr.FromInt32(0)
		d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
			RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &s, MaxUnavailable: &u}}
	}
	return d
}

// changeWave scales some Deployments (1 to 5 replicas) and changes the
// image of others; it returns what it did.
func changeWave(t *testing.T, client kubernetes.Interface, rng *rand.Rand, names []string, wave int) []string {
	t.Helper()
	picked := rng.Perm(len(names))[:12]
	ops := make([]string, len(picked))
	scale := make([]int32, len(picked))
	for i := range picked {
		if rng.IntN(2) == 0 {
			scale[i] = int32(1 + rng.IntN(5))
			ops[i] = fmt.Sprintf("scale %s to %d", names[picked[i]], scale[i])
		} else {
			ops[i] = fmt.Sprintf("image of %s to v%d", names[picked[i]], wave)
		}
	}
	sel := make([]string, len(picked))
	for i, p := range picked {
		sel[i] = names[p]
	}
	parallel(t, sel, func(i int, name string) error {
		return update(client, name, func(d *appsv1.Deployment) {
			if scale[i] > 0 {
				d.Spec.Replicas = &scale[i]
			} else {
				d.Spec.Template.Spec.Containers[0].Image = fmt.Sprintf("nginx:v%d", wave)
			}
		})
	})
	return ops
}

// update applies change to a Deployment, retrying on conflicts.
func update(client kubernetes.Interface, name string, change func(*appsv1.Deployment)) error {
	ctx := context.Background()
	for {
		d, err := client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		change(d)
		_, err = client.AppsV1().Deployments(ns).Update(ctx, d, metav1.UpdateOptions{})
		if !apierrors.IsConflict(err) {
			return err
		}
	}
}

// parallel runs fn for every name, eight at a time, and fails the test on
// the first error.
func parallel(t *testing.T, names []string, fn func(i int, name string) error) {
	t.Helper()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	sem := make(chan struct{}, 8)
	for i, name := range names {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := fn(i, name); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("%s: %w", name, err))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%v", errs)
	}
}

// waitConverged waits until every Deployment has rolled out its current
// generation with exactly one ReplicaSet scaled above zero.
func waitConverged(t *testing.T, client kubernetes.Interface, names []string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var pending []string
	for {
		pending = notConverged(t, client, names)
		if len(pending) == 0 {
			return
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Fatalf("%d deployments not converged %v after the last change:\n%s", len(pending), timeout, strings.Join(pending, "\n"))
}

// notConverged describes the Deployments that have not converged.
func notConverged(t *testing.T, client kubernetes.Interface, names []string) []string {
	t.Helper()
	ctx := context.Background()
	dl, err := client.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list deployments: %v", err)
	}
	rl, err := client.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list replicasets: %v", err)
	}
	scaled := map[string][]string{}
	for _, rs := range rl.Items {
		ref := metav1.GetControllerOf(&rs)
		if ref != nil && rs.Spec.Replicas != nil && *rs.Spec.Replicas > 0 {
			scaled[string(ref.UID)] = append(scaled[string(ref.UID)], fmt.Sprintf("%s=%d/%d", rs.Name, *rs.Spec.Replicas, rs.Status.ReadyReplicas))
		}
	}
	var out []string
	seen := 0
	for _, d := range dl.Items {
		if !strings.HasPrefix(d.Name, "web-") {
			continue
		}
		seen++
		want := *d.Spec.Replicas
		st := d.Status
		ok := st.ObservedGeneration == d.Generation && st.Replicas == want && st.UpdatedReplicas == want &&
			st.ReadyReplicas == want && st.AvailableReplicas == want && len(scaled[string(d.UID)]) == 1
		if !ok {
			out = append(out, fmt.Sprintf("%s: gen %d observed %d spec %d replicas %d updated %d ready %d available %d; scaled ReplicaSets %v",
				d.Name, d.Generation, st.ObservedGeneration, want, st.Replicas, st.UpdatedReplicas, st.ReadyReplicas, st.AvailableReplicas, scaled[string(d.UID)]))
		}
	}
	if seen != len(names) {
		out = append(out, fmt.Sprintf("%d deployments, want %d", seen, len(names)))
	}
	sort.Strings(out)
	return out
}
