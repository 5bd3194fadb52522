package daemonset

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BenchmarkDaemonSetNodes creates a DaemonSet over 500 nodes on a real
// control plane and reports how fast its pods are made (pods/s, from the
// create to status currentNumberScheduled 500), against the raw rate of
// the same number of pod creates through the API by 16 writers in the same
// run (raw-pods/s), and the ratio of the two. Run with -benchtime=1x.
func BenchmarkDaemonSetNodes(b *testing.B) {
	for range b.N {
		benchNodes(b)
	}
}

func benchNodes(b *testing.B) {
	const ns, nodes, writers = "bench", 500, 16
	b.StopTimer()
	env := start(b, ns)
	ctx := context.Background()
	for i := range nodes {
		createNode(b, env, fmt.Sprintf("node-%03d", i))
	}
	// Baseline: plain pod creates, as fast as 16 writers go.
	began := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			for i := w; i < nodes; i += writers {
				p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("raw-%03d", i)},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox:1"}}}}
				if _, err := env.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	raw := float64(nodes) / time.Since(began).Seconds()

	b.StartTimer()
	began = time.Now()
	ds := createDS(b, env, newDS(ns, "agent"))
	waitStatus(b, env, ds, "every node scheduled", func(s appsv1.DaemonSetStatus) bool { return s.CurrentNumberScheduled == nodes })
	took := time.Since(began)
	b.StopTimer()
	rate := float64(nodes) / took.Seconds()
	b.ReportMetric(rate, "pods/s")
	b.ReportMetric(raw, "raw-pods/s")
	b.ReportMetric(rate/raw, "ratio")
	b.ReportMetric(took.Seconds(), "s-to-scheduled")
}
