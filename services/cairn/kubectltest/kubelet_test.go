package kubectltest

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// brokenImage marks images the stand-in kubelet never starts: a pod with a
// container whose image contains it stays Pending and never becomes ready.
const brokenImage = "broken"

// kubelet stands in for the kubelet that `cairn up` does not have: it
// watches every pod and reports each one that is not Running yet as
// Running and Ready through pods/status, unless one of its images is
// broken. It relists every few seconds, so a status write that failed (a
// conflict, a watch that ended) is retried.
type kubelet struct {
	client kubernetes.Interface
	t      *testing.T
}

// startKubelet runs the stand-in kubelet against c with the admin
// kubeconfig `cairn up` wrote, until the returned stop is called or the
// test ends.
func startKubelet(t *testing.T, c *cluster) (stop func()) {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", c.kubeconfig)
	if err != nil {
		t.Fatalf("kubelet: load kubeconfig: %v", err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatalf("kubelet: client: %v", err)
	}
	k := &kubelet{client: client, t: t}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { k.run(ctx) })
	stop = func() {
		cancel()
		wg.Wait()
	}
	t.Cleanup(stop)
	return stop
}

// run lists every pod, starts those that need it, then follows a watch
// from the list's resourceVersion for a few seconds; and again, until ctx
// is done.
func (k *kubelet) run(ctx context.Context) {
	for ctx.Err() == nil {
		if err := k.syncOnce(ctx); err != nil && ctx.Err() == nil {
			k.t.Logf("kubelet: %v", err)
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}
}

func (k *kubelet) syncOnce(ctx context.Context) error {
	list, err := k.client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for i := range list.Items {
		k.start(ctx, &list.Items[i])
	}
	timeout := int64(5)
	w, err := k.client.CoreV1().Pods(metav1.NamespaceAll).Watch(ctx, metav1.ListOptions{
		ResourceVersion: list.ResourceVersion,
		TimeoutSeconds:  &timeout,
	})
	if err != nil {
		return err
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.ResultChan():
			if !ok {
				return nil
			}
			if ev.Type != watch.Added && ev.Type != watch.Modified {
				continue
			}
			if p, ok := ev.Object.(*corev1.Pod); ok {
				k.start(ctx, p)
			}
		}
	}
}

// start reports p Running and Ready unless it already is, is being
// deleted, or runs a broken image. A failed write is left to the next
// relist.
func (k *kubelet) start(ctx context.Context, p *corev1.Pod) {
	if p.Status.Phase == corev1.PodRunning || p.DeletionTimestamp != nil {
		return
	}
	for _, c := range p.Spec.Containers {
		if strings.Contains(c.Image, brokenImage) {
			return
		}
	}
	p = p.DeepCopy()
	now := metav1.Now()
	p.Status.Phase = corev1.PodRunning
	p.Status.StartTime = &now
	p.Status.Conditions = nil
	for _, typ := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: typ, Status: corev1.ConditionTrue, LastTransitionTime: now})
	}
	p.Status.ContainerStatuses = nil
	for _, c := range p.Spec.Containers {
		started := true
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{
			Name:    c.Name,
			Image:   c.Image,
			Ready:   true,
			Started: &started,
			State:   corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
		})
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := k.client.CoreV1().Pods(p.Namespace).UpdateStatus(cctx, p, metav1.UpdateOptions{}); err != nil && ctx.Err() == nil {
		k.t.Logf("kubelet: start pod %s/%s: %v", p.Namespace, p.Name, err)
	}
}
