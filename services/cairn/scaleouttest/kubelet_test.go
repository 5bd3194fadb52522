package scaleouttest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/cairn-dev/cairn/events/consumer"
)

// readyAfter is how long the stand-in kubelet lets a pod start: long
// enough that rollouts take a few steps' time, so the kills land mid-way.
const readyAfter = 200 * time.Millisecond

// startKubelet runs a kubelet stand-in for the pods of namespace until
// the returned stop is called (stop may be called more than once): every
// pod it sees becomes Running and Ready through pods/status, a while after
// it first saw it; with complete, it then succeeds a while later (a Job's
// pods).
func startKubelet(t *testing.T, cfg *rest.Config, js jetstream.JetStream, client kubernetes.Interface, namespace string, complete bool) (stop func()) {
	t.Helper()
	pods, err := consumer.NewCache(consumer.CacheConfig[*corev1.Pod]{
		Resource: corev1.SchemeGroupVersion.WithResource("pods"), Namespace: namespace, Config: cfg, JS: js})
	if err != nil {
		t.Fatal(err)
	}
	k := &kubelet{client: client, pods: pods, seen: map[types.UID]time.Time{}, complete: complete}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- consumer.RunAll(ctx, pods, runFunc(k.loop)) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("kubelet: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

type kubelet struct {
	client kubernetes.Interface
	pods   *consumer.Cache[*corev1.Pod]
	seen   map[types.UID]time.Time // first seen, or last tried
	// complete: Ready pods succeed readyAfter later.
	complete bool
}

// runFunc adapts a function to consumer.Runner.
type runFunc func(ctx context.Context) error

func (f runFunc) Run(ctx context.Context) error { return f(ctx) }

func (k *kubelet) loop(ctx context.Context) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		var wg sync.WaitGroup
		sem := make(chan struct{}, 8)
		for _, pod := range k.pods.List(nil) {
			if pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodSucceeded {
				continue
			}
			if podReady(pod) && !k.complete {
				continue
			}
			first, ok := k.seen[pod.UID]
			if !ok {
				k.seen[pod.UID] = time.Now()
				continue
			}
			if time.Since(first) < readyAfter {
				continue
			}
			k.seen[pod.UID] = time.Now() // retried later if this fails
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				if podReady(pod) {
					k.setPhase(ctx, pod, corev1.PodSucceeded)
				} else {
					k.setPhase(ctx, pod, corev1.PodRunning)
				}
			}()
		}
		wg.Wait()
	}
}

// setPhase sets the pod Running and Ready, or Succeeded and no longer
// Ready; a failure (a conflict with a newer version, a pod gone) is
// retried on a later tick if still needed.
func (k *kubelet) setPhase(ctx context.Context, pod *corev1.Pod, phase corev1.PodPhase) {
	p := pod.DeepCopy()
	now := metav1.Now()
	ready := corev1.ConditionTrue
	if phase != corev1.PodRunning {
		ready = corev1.ConditionFalse
	}
	p.Status.Phase = phase
	p.Status.Conditions = []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: corev1.PodReady, Status: ready, LastTransitionTime: now},
	}
	_, _ = k.client.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{})
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
