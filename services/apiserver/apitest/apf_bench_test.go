package apitest

import (
	"os"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/services/apiserver"
	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
	"github.com/cairn-dev/cairn/services/embedded/embeddedtest"
)

// BenchmarkAPIPriorityAndFairness (go tool task bench:apf) is the cost of
// API Priority and Fairness on the create path: the same benchPods pod
// creates by benchClients clients of an ordinary user (alice: kube's
// global-default FlowSchema and priority level, not exempt as an admin of
// system:masters is) through a control plane without APF and then through
// one with it (kube's bootstrap objects, DefaultMaxRequestsInFlight),
// same run, in four rounds (off, on, on, off): creates/s and CPU per
// create (the mean of each mode's two rounds), p50/p99 (the larger of its
// two rounds), and the ratios with APF to without.
func BenchmarkAPIPriorityAndFairness(b *testing.B) {
	type result struct {
		rate     float64
		p50, p99 time.Duration
		cpuUS    float64
	}
	run := func(b *testing.B, apf bool) result {
		env := controlplanetest.Start(b, controlplanetest.Options{Fsync: os.Getenv("BENCH_NOFSYNC") == "", TLS: true,
			Authorizer: apiserver.AlwaysAllow{}, PriorityAndFairness: apf})
		cpu := embeddedtest.ProcessCPU()
		n, p50, p99, elapsed := createPodsWith(b, env.ConfigFor(controlplanetest.UserToken), false)
		used := embeddedtest.ProcessCPU() - cpu
		return result{rate: float64(n) / elapsed.Seconds(), p50: p50, p99: p99, cpuUS: float64(used.Microseconds()) / float64(n)}
	}
	// Sub-benchmarks would hide the parent's metrics and log, so the
	// rounds run in this one: off, on, on, off (a drift of the machine's
	// load weighs on both alike), each on a control plane of its own.
	merge := func(a, b result) result {
		return result{rate: (a.rate + b.rate) / 2, p50: max(a.p50, b.p50), p99: max(a.p99, b.p99), cpuUS: (a.cpuUS + b.cpuUS) / 2}
	}
	for range b.N {
		off1, on1, on2, off2 := run(b, false), run(b, true), run(b, true), run(b, false)
		off, on := merge(off1, off2), merge(on1, on2)
		for i, r := range []result{off1, on1, on2, off2} {
			b.Logf("round %d (APF %v): %.0f creates/s, p50 %v, p99 %v, %.0f µs CPU each", i+1, i == 1 || i == 2,
				r.rate, r.p50.Round(100*time.Microsecond), r.p99.Round(100*time.Microsecond), r.cpuUS)
		}
		b.ReportMetric(off.rate, "creates/s-off")
		b.ReportMetric(on.rate, "creates/s-on")
		b.ReportMetric(on.rate/off.rate, "rate-on/off")
		b.ReportMetric(off.cpuUS, "cpu-us/create-off")
		b.ReportMetric(on.cpuUS, "cpu-us/create-on")
		b.ReportMetric(float64(on.p99.Microseconds())/1000, "p99-ms-on")
		b.ReportMetric(float64(off.p99.Microseconds())/1000, "p99-ms-off")
		b.Logf("%d creates by %d clients of an ordinary user: without APF %.0f/s (p50 %v, p99 %v, %.0f µs CPU each); with APF %.0f/s (p50 %v, p99 %v, %.0f µs); rate ratio %.2f, CPU ratio %.2f",
			benchPods, benchClients, off.rate, off.p50.Round(100*time.Microsecond), off.p99.Round(100*time.Microsecond), off.cpuUS,
			on.rate, on.p50.Round(100*time.Microsecond), on.p99.Round(100*time.Microsecond), on.cpuUS, on.rate/off.rate, on.cpuUS/off.cpuUS)
	}
}
