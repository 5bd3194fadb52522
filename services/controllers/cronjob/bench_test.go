package cronjob

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cairn-dev/cairn/events/consumer/consumertest"
	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
	"github.com/cairn-dev/cairn/services/embedded/embeddedtest"
)

// BenchmarkCronJobsSameMinute creates 1,000 CronJobs "* * * * *" on the
// real clock against a real control plane and reports how many seconds
// after the minute all 1,000 Jobs of that minute exist, with the raw etcd
// put rate measured first in the same run (each Job is one create and the
// CronJob's status update, besides the controller's reads). It waits for
// the next minute (up to a minute). Run with -benchtime=1x.
func BenchmarkCronJobsSameMinute(b *testing.B) {
	for range b.N {
		benchSameMinute(b, 1000)
	}
}

func benchSameMinute(b *testing.B, n int) {
	b.StopTimer()
	const ns = "bench"
	etcd := embeddedtest.PutRate(b, int64(2*n), 32, 1024)
	env := controlplanetest.Start(b)
	m := consumertest.Manager(b, env, controlplanetest.ControllerToken, controlplanetest.Logger("CRONJOB_TEST_LOG"), nil)
	if _, err := New(m, Options{}); err != nil {
		b.Fatal(err)
	}
	controlplanetest.RunSynced(b, m)
	ctx := context.Background()
	if _, err := env.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	// Leave at least 50 s to create them before the minute they fire in
	// (a loaded machine creates a few dozen a second).
	if time.Until(time.Now().Truncate(time.Minute).Add(time.Minute)) < 50*time.Second {
		time.Sleep(time.Until(time.Now().Truncate(time.Minute).Add(time.Minute)))
	}
	minute := time.Now().Truncate(time.Minute).Add(time.Minute)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			cj := newCronJob(ns, fmt.Sprintf("cj-%d", i), batchv1.ForbidConcurrent)
			if _, err := env.Client.BatchV1().CronJobs(ns).Create(ctx, cj, metav1.CreateOptions{}); err != nil {
				b.Error(err)
			}
		})
	}
	wg.Wait()
	if time.Now().After(minute) {
		b.Fatalf("creating %d cronjobs took past the minute", n)
	}
	b.StartTimer()
	for {
		l, err := env.Client.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			b.Fatal(err)
		}
		if len(l.Items) >= n {
			break
		}
		if time.Since(minute) > 2*time.Minute {
			b.Fatalf("%d of %d jobs after 2 minutes", len(l.Items), n)
		}
		time.Sleep(100 * time.Millisecond)
	}
	took := time.Since(minute)
	b.StopTimer()
	b.ReportMetric(took.Seconds(), "s-after-minute")
	b.ReportMetric(float64(n)/took.Seconds(), "jobs/s")
	b.ReportMetric(etcd, "etcd-puts/s")
	b.Logf("%d CronJobs of one minute: every Job created %.1f s after the minute (%.0f jobs/s); raw etcd %.0f puts/s", n, took.Seconds(), float64(n)/took.Seconds(), etcd)
}
