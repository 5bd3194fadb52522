package job

import (
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
)

// BenchmarkJobCompletions runs one Job of 1,000 completions with
// parallelism 100 against a real control plane and the stand-in kubelet
// (each pod succeeds on its second poll), and reports pods/s and the
// seconds to Complete. Run with -benchtime=1x.
func BenchmarkJobCompletions(b *testing.B) {
	for range b.N {
		benchJob(b)
	}
}

func benchJob(b *testing.B) {
	const ns, completions, parallelism = "bench", 1000, 100
	b.StopTimer()
	env := start(b, ns, Options{})
	runKubelet(b, env, ns, succeed)
	b.StartTimer()
	began := time.Now()
	createJob(b, env, newJob(ns, "many", ptr[int32](completions), ptr[int32](parallelism)))
	done := waitJob(b, env, ns, "many", "Complete", func(j *batchv1.Job) bool { return hasCondition(j, batchv1.JobComplete, "") })
	took := time.Since(began)
	b.StopTimer()
	if done.Status.Succeeded != completions {
		b.Fatalf("succeeded %d, want %d", done.Status.Succeeded, completions)
	}
	b.ReportMetric(took.Seconds(), "s-to-complete")
	b.ReportMetric(completions/took.Seconds(), "pods/s")
}
