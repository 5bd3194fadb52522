package plugins

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	fw "github.com/cairn-dev/cairn/services/scheduler/framework"
)

// BenchmarkSchedule is one scheduling cycle (no I/O) on 5,000 nodes over
// 10 zones already holding 5,000 pods, as in the middle of the service's
// BenchmarkScheduler: plain pods, then pods with required anti-affinity
// per host and a DoNotSchedule zone spread (100 groups). Each placed pod
// is counted, as the scheduler assumes it.
func BenchmarkSchedule(b *testing.B) {
	for _, tc := range []struct {
		name     string
		affinity bool
	}{{"Basic", false}, {"AntiAffinityTopologySpread", true}} {
		b.Run(tc.name, func(b *testing.B) {
			pod := func(i int) *corev1.Pod {
				p := mkPod(fmt.Sprintf("p%d", i), req("100m", "500Mi"))
				if tc.affinity {
					app := fmt.Sprintf("app-%d", i%100)
					p.Labels["app"] = app
					podAntiAffinity(podTerm(corev1.LabelHostname, "app", app))(p)
					spread(1, zone, corev1.DoNotSchedule, "app", app)(p)
				}
				return p
			}
			snap := fw.NewSnapshot(nil, nil)
			for i := range 5000 {
				snap.AddNode(mkNode(fmt.Sprintf("node-%04d", i), "4", "32Gi", nLabels(zone, fmt.Sprintf("zone-%d", i%10)), nPods("110")))
			}
			f := NewDefaultFramework(fw.Options{Parallelism: 2, Seed: 1})
			ctx := context.Background()
			var evaluated int
			place := func(i int) {
				pi := fw.NewPodInfo(pod(i), 0)
				res, err := f.Schedule(ctx, pi, snap)
				if err != nil {
					b.Fatal(err)
				}
				snap.AddPod(pi, res.Node)
				evaluated += res.Evaluated
			}
			for i := range 5000 {
				place(i)
			}
			b.ResetTimer()
			cpu0 := cpuTime()
			evaluated = 0
			for i := range b.N {
				place(5000 + i%5000)
				if i%5000 == 4999 {
					b.StopTimer()
					for j := range 5000 {
						p := pod(5000 + j)
						for _, ni := range snap.Nodes {
							if snap.RemovePod(p.Namespace+"/"+p.Name, ni.Name()) {
								break
							}
						}
					}
					b.StartTimer()
				}
			}
			b.ReportMetric(float64(evaluated)/float64(b.N), "nodes/op")
			b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
		})
	}
}

// cpuTime is the CPU time (user and system) the process has used: unlike
// ns/op, it does not grow with the load others put on the machine.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
