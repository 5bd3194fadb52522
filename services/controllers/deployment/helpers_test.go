package deployment

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/cairn-dev/cairn/events/consumer"
	"github.com/cairn-dev/cairn/events/consumer/consumertest"
	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const wait = 45 * time.Second

// world is a control plane with the deployment controller, a ReplicaSet
// controller and a kubelet stand-in running until the test ends.
type world struct {
	env     *controlplanetest.Env
	client  kubernetes.Interface
	kubelet *fakeKubelet
	// ctrl is the deployment controller under test.
	ctrl *Controller
	// proxy is the apiserver's URL behind a loopback proxy that adds the
	// admin's token: kubectl sends no bearer token over plain HTTP.
	proxy string
}

func testLog() *slog.Logger {
	if os.Getenv("DEPLOY_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

func startWorld(t *testing.T) *world {
	t.Helper()
	env := controlplanetest.Start(t)
	m := consumertest.Manager(t, env, controlplanetest.ControllerToken, testLog(), nil)
	ctrl, err := New(m, Options{Workers: 4})
	if err != nil {
		t.Fatal(err)
	}
	if err := addReplicaSets(m, env); err != nil {
		t.Fatal(err)
	}
	kl, err := newFakeKubelet(env)
	if err != nil {
		t.Fatal(err)
	}
	run(t, m, kl)
	target, err := url.Parse(env.URL)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.FlushInterval = -1 // watches
	proxy := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		r.Header.Set("Authorization", "Bearer "+controlplanetest.AdminToken)
		rp.ServeHTTP(rw, r)
	}))
	t.Cleanup(proxy.Close)
	return &world{env: env, client: env.Client, kubelet: kl, ctrl: ctrl, proxy: proxy.URL}
}

// run runs the runners until the test ends; the cleanup waits for them.
func run(t *testing.T, runners ...consumer.Runner) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- consumer.RunAll(ctx, runners...) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	})
}

func (w *world) namespace(t *testing.T, name string) string {
	t.Helper()
	_, err := w.client.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	return name
}

// eventually polls cond until it holds or d passes.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

func newDeployment(ns, name string, replicas int32, image string) *appsv1.Deployment {
	return controlplanetest.Deployment(ns, name, replicas, corev1.Container{Name: "c", Image: image})
}

func rollingStrategy(surge, unavailable string) appsv1.DeploymentStrategy {
	s, u := intstr.Parse(surge), intstr.Parse(unavailable)
	return appsv1.DeploymentStrategy{
		Type:          appsv1.RollingUpdateDeploymentStrategyType,
		RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &s, MaxUnavailable: &u},
	}
}

func (w *world) create(t *testing.T, d *appsv1.Deployment) *appsv1.Deployment {
	t.Helper()
	out, err := w.client.AppsV1().Deployments(d.Namespace).Create(context.Background(), d, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create deployment %s: %v", d.Name, err)
	}
	return out
}

func (w *world) get(t *testing.T, ns, name string) *appsv1.Deployment {
	t.Helper()
	d, err := w.client.AppsV1().Deployments(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get deployment %s: %v", name, err)
	}
	return d
}

// update applies change to the deployment, retrying on conflicts.
func (w *world) update(t *testing.T, ns, name string, change func(*appsv1.Deployment)) *appsv1.Deployment {
	t.Helper()
	for {
		d := w.get(t, ns, name)
		change(d)
		out, err := w.client.AppsV1().Deployments(ns).Update(context.Background(), d, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			continue
		}
		if err != nil {
			t.Fatalf("update deployment %s: %v", name, err)
		}
		return out
	}
}

func (w *world) replicaSets(t *testing.T, ns string) []appsv1.ReplicaSet {
	t.Helper()
	l, err := w.client.AppsV1().ReplicaSets(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list replica sets: %v", err)
	}
	sort.Slice(l.Items, func(i, j int) bool { return revision(&l.Items[i]) < revision(&l.Items[j]) })
	return l.Items
}

func (w *world) pods(t *testing.T, ns string) []corev1.Pod {
	t.Helper()
	l, err := w.client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list pods: %v", err)
	}
	return l.Items
}

// complete waits for the rollout of the deployment's current generation
// to finish, as kubectl rollout status decides it, and returns it.
func (w *world) complete(t *testing.T, ns, name string) *appsv1.Deployment {
	t.Helper()
	var d *appsv1.Deployment
	eventually(t, wait, "rollout of "+name+" to complete", func() bool {
		d = w.get(t, ns, name)
		return rolloutDone(d)
	})
	return d
}

func rolloutDone(d *appsv1.Deployment) bool {
	c := getCondition(d.Status, appsv1.DeploymentProgressing)
	return d.Status.ObservedGeneration >= d.Generation &&
		d.Status.UpdatedReplicas == *d.Spec.Replicas && d.Status.Replicas == *d.Spec.Replicas &&
		d.Status.AvailableReplicas == *d.Spec.Replicas && c != nil && c.Reason == ReasonNewRSAvailable
}

func describe(d *appsv1.Deployment) string {
	var conds []string
	for _, c := range d.Status.Conditions {
		conds = append(conds, fmt.Sprintf("%s=%s/%s", c.Type, c.Status, c.Reason))
	}
	return fmt.Sprintf("gen %d observed %d replicas %d updated %d ready %d available %d unavailable %d rev %s %v",
		d.Generation, d.Status.ObservedGeneration, d.Status.Replicas, d.Status.UpdatedReplicas, d.Status.ReadyReplicas,
		d.Status.AvailableReplicas, d.Status.UnavailableReplicas, d.Annotations[RevisionAnnotation], strings.Join(conds, " "))
}

// fakeKubelet marks pods Running and Ready a while after it first sees
// them, through pods/status with the admin client, as a kubelet would.
// Pods whose image contains "broken" never become ready.
type fakeKubelet struct {
	client kubernetes.Interface
	pods   *consumer.Cache[*corev1.Pod]

	mu        sync.Mutex
	seen      map[string]time.Time
	readyTime time.Duration
}

func newFakeKubelet(env *controlplanetest.Env) (*fakeKubelet, error) {
	pods, err := consumer.NewCache(consumer.CacheConfig[*corev1.Pod]{Resource: podsGVR, Config: env.Config, JS: env.JS})
	if err != nil {
		return nil, err
	}
	return &fakeKubelet{client: env.Client, pods: pods, seen: map[string]time.Time{}, readyTime: 150 * time.Millisecond}, nil
}

func (k *fakeKubelet) Run(ctx context.Context) error {
	return consumer.RunAll(ctx, k.pods, runFunc(k.loop))
}

func (k *fakeKubelet) loop(ctx context.Context) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		for _, pod := range k.pods.List(nil) {
			if ctx.Err() != nil {
				return nil
			}
			k.tend(ctx, pod)
		}
	}
}

func (k *fakeKubelet) tend(ctx context.Context, pod *corev1.Pod) {
	if podReady(pod) || pod.DeletionTimestamp != nil || strings.Contains(pod.Spec.Containers[0].Image, "broken") {
		return
	}
	key := string(pod.UID)
	k.mu.Lock()
	first, ok := k.seen[key]
	if !ok {
		k.seen[key] = time.Now()
		first = time.Now()
	}
	delay := k.readyTime
	k.mu.Unlock()
	if time.Since(first) < delay {
		return
	}
	p := pod.DeepCopy()
	now := metav1.Now()
	p.Status.Phase = corev1.PodRunning
	p.Status.Conditions = []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
	}
	_, _ = k.client.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{})
}

// runFunc adapts a function to consumer.Runner.
type runFunc func(ctx context.Context) error

func (f runFunc) Run(ctx context.Context) error { return f(ctx) }

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
