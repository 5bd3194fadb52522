package e2etest

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
	"github.com/cairn-dev/cairn/services/embedded/embeddedtest"
	"github.com/cairn-dev/cairn/services/kubelet/hollow"
)

// BenchmarkJobHollow runs one Job of 10,000 completions at parallelism 500
// on 100 hollow nodes with the real controller-manager (Job controller and
// all) and scheduler on an in-process control plane. Each pod's container
// runs 1 s and exits 0 (hollow.AnnotationExitAfter), so every completion
// takes the whole path: create, schedule, bind, start, Running, exit,
// Succeeded, the Job's finalizer accounting, delete. It reports pods/s
// (completions over the time to the Complete condition), the seconds to
// Complete, the CPU time of this process per pod, and the raw etcd put rate
// measured first in the same run. BENCH_JOB_COMPLETIONS,
// BENCH_JOB_PARALLELISM, BENCH_HOLLOW_NODES and BENCH_JOB_RUN (a duration)
// change the size.
func BenchmarkJobHollow(b *testing.B) {
	completions := envInt("BENCH_JOB_COMPLETIONS", 10000)
	parallelism := envInt("BENCH_JOB_PARALLELISM", 500)
	nodes := envInt("BENCH_HOLLOW_NODES", 100)
	run := "1s"
	if v := os.Getenv("BENCH_JOB_RUN"); v != "" {
		run = v
	}
	for range b.N {
		b.StopTimer()
		etcd := embeddedtest.PutRate(b, int64(completions), 64, 1024)
		env := controlplanetest.Start(b)
		setup := time.Now()
		startHollowCluster(b, env, nodes, controlplanetest.Logger("E2E_BENCH_LOG"))
		b.Logf("%d hollow nodes, controller-manager and scheduler ready in %v", nodes, time.Since(setup).Round(time.Millisecond))
		ctx := context.Background()
		job := &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "many"},
			Spec: batchv1.JobSpec{
				Completions: ptr.To(int32(completions)), Parallelism: ptr.To(int32(parallelism)), BackoffLimit: ptr.To(int32(6)),
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{hollow.AnnotationExitAfter: run}},
					Spec: corev1.PodSpec{
						RestartPolicy: corev1.RestartPolicyNever,
						Containers: []corev1.Container{{Name: "c", Image: "cairn.local/busybox:1.36",
							Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
								corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("8Mi")}}}},
					},
				},
			},
		}
		cpu0 := embeddedtest.ProcessCPU()
		b.StartTimer()
		start := time.Now()
		if _, err := env.Client.BatchV1().Jobs("default").Create(ctx, job, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		var done *batchv1.Job
		last := time.Now()
		poll(b, 30*time.Minute, "Job Complete", func() error {
			j, err := env.Client.BatchV1().Jobs("default").Get(ctx, "many", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if time.Since(last) > 10*time.Second {
				last = time.Now()
				b.Logf("after %v: %d succeeded, %d active, %d failed", time.Since(start).Round(time.Second), j.Status.Succeeded, j.Status.Active, j.Status.Failed)
			}
			for _, c := range j.Status.Conditions {
				if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
					done = j
					return nil
				}
				if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue {
					b.Fatalf("Job failed: %s: %s", c.Reason, c.Message)
				}
			}
			return fmt.Errorf("%d/%d succeeded", j.Status.Succeeded, completions)
		})
		took := time.Since(start)
		b.StopTimer()
		cpu := embeddedtest.ProcessCPU() - cpu0
		if int(done.Status.Succeeded) != completions {
			b.Fatalf("succeeded %d, want %d", done.Status.Succeeded, completions)
		}
		rate := float64(completions) / took.Seconds()
		b.ReportMetric(rate, "pods/s")
		b.ReportMetric(took.Seconds(), "s-to-complete")
		b.ReportMetric(float64(cpu.Microseconds())/float64(completions), "cpu-us/pod")
		b.ReportMetric(etcd, "etcd-puts/s")
		b.ReportMetric(rate/etcd, "ratio")
		b.Logf("Job of %d completions at parallelism %d on %d hollow nodes, pods running %s each: Complete after %v (%.0f pods/s, %.0f µs CPU per pod); raw etcd %.0f puts/s, ratio %.3f (load %s)",
			completions, parallelism, nodes, run, took.Round(time.Millisecond), rate, float64(cpu.Microseconds())/float64(completions), etcd, rate/etcd, loadavg())
	}
}

func ptrTo[T any](v T) *T { return &v }
