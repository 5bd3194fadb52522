package node_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cairn-dev/cairn/services/kubelet/node"
	"github.com/cairn-dev/cairn/services/kubelet/node/nodetest"
)

// reportQuantiles reports p50, p99 and max of samples in milliseconds.
func reportQuantiles(b *testing.B, name string, samples []time.Duration) {
	if len(samples) == 0 {
		return
	}
	s := slices.Clone(samples)
	slices.Sort(s)
	q := func(p float64) float64 {
		return float64(s[min(len(s)-1, int(p*float64(len(s))))].Microseconds()) / 1000
	}
	b.ReportMetric(q(0.50), name+"-p50-ms")
	b.ReportMetric(q(0.99), name+"-p99-ms")
	b.ReportMetric(float64(s[len(s)-1].Microseconds())/1000, name+"-max-ms")
}

// BenchmarkNodeStart measures node.Start from nothing: containerd launched
// in a fresh network namespace until its CRI is ready ("ready"), and the
// whole Start including the import of the two images ("start").
// Run with -benchtime 10x for a p50 over 10.
func BenchmarkNodeStart(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root")
	}
	imgs := nodetest.Images(b)
	var ready, total []time.Duration
	b.ResetTimer()
	for range b.N {
		var r [4]byte
		_, _ = rand.Read(r[:])
		cfg := node.Config{Dir: b.TempDir(), NetNS: "cairn-b-" + hex.EncodeToString(r[:]), CreateNetNS: true, Images: imgs, KillWithParent: true}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		t0 := time.Now()
		rt, err := node.Start(ctx, cfg, nil)
		if err != nil {
			cancel()
			b.Fatal(err)
		}
		total = append(total, time.Since(t0))
		ready = append(ready, rt.Timings().Ready)
		b.StopTimer()
		if err := rt.Stop(ctx); err != nil {
			b.Error(err)
		}
		cancel()
		b.StartTimer()
	}
	reportQuantiles(b, "ready", ready)
	reportQuantiles(b, "start", total)
}

// BenchmarkPodStart measures, on one running node, RunPodSandbox (CNI
// included) plus CreateContainer and StartContainer of a busybox container,
// one pod at a time. Run with -benchtime 10x for a p50 over 10.
func BenchmarkPodStart(b *testing.B) {
	rt := nodetest.Start(b)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	rs := rt.RuntimeService()
	var sandbox, total []time.Duration
	logRoot := b.TempDir()
	b.ResetTimer()
	for i := range b.N {
		t0 := time.Now()
		p, err := startPod(ctx, rt, podSpec{name: "bench-" + hex.EncodeToString([]byte{byte(i)}), command: []string{"sleep", "3600"}}, logRoot)
		if err != nil {
			b.Fatal(err)
		}
		total = append(total, time.Since(t0))
		b.StopTimer()
		sandbox = append(sandbox, p.sandboxTook)
		if _, err := rs.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: p.sandboxID}); err != nil {
			b.Fatal(err)
		}
		if _, err := rs.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: p.sandboxID}); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	reportQuantiles(b, "sandbox", sandbox)
	reportQuantiles(b, "pod", total)
}

// BenchmarkPodStart30 starts 30 pods (sandbox and one busybox container
// each) at once on one node, as the kubelet's start-up SLO benchmark does,
// and reports per-pod start latency and the wall time for all 30. It also
// reports the machine's CPU time (every process: containerd, shims, runc,
// the CNI plugins, this process) per pod started and how busy the cores
// were while the 30 started, from /proc/stat: on a quiet machine, a busy
// share near 1 means the start-up is bound by CPU.
//
// Sub-benchmarks run the node's default (crun, state on tmpfs) and the
// alternatives back to back in one run: runc with state on tmpfs, and runc
// with state on Dir's disk (the node before crun and tmpfs).
func BenchmarkPodStart30(b *testing.B) {
	for _, bc := range []struct {
		name string
		opt  nodetest.Option
	}{
		{"default", func(*node.Config) {}},
		{"runc", func(c *node.Config) { c.OCIRuntime = "runc" }},
		{"runc-disk", func(c *node.Config) { c.OCIRuntime = "runc"; c.StateOnDisk = true }},
	} {
		b.Run(bc.name, func(b *testing.B) { benchPodStart30(b, bc.opt) })
	}
}

func benchPodStart30(b *testing.B, opt nodetest.Option) {
	const n = 30
	rt := nodetest.Start(b, opt)
	b.Logf("OCI runtime %s, load average %s", rt.OCIRuntime(), loadavg())
	rs := rt.RuntimeService()
	logRoot := b.TempDir()
	var lat, sandbox, create, start, wall []time.Duration
	var cpu, span float64 // busy and total core-seconds while pods started
	var nodeCPU time.Duration
	b.ResetTimer()
	for range b.N {
		// A deadline per round: on a loaded 2-core machine one round can
		// take tens of seconds.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		type result struct {
			p   *pod
			d   time.Duration
			err error
		}
		res := make(chan result, n)
		busy0, total0 := machineCPU(b)
		node0 := nodetest.CPU(b, rt.Pid(), rt.Socket())
		t0 := time.Now()
		for i := range n {
			go func() {
				p, err := startPod(ctx, rt, podSpec{name: "c" + hex.EncodeToString([]byte{byte(i)}), command: []string{"sleep", "3600"}}, logRoot)
				res <- result{p, time.Since(t0), err}
			}()
		}
		var pods []*pod
		for range n {
			r := <-res
			if r.err != nil {
				b.Fatal(r.err)
			}
			lat = append(lat, r.d)
			sandbox = append(sandbox, r.p.sandboxTook)
			create = append(create, r.p.createTook)
			start = append(start, r.p.startTook)
			pods = append(pods, r.p)
		}
		wall = append(wall, time.Since(t0))
		busy1, total1 := machineCPU(b)
		nodeCPU += nodetest.CPU(b, rt.Pid(), rt.Socket()) - node0
		cpu += busy1 - busy0
		span += total1 - total0
		b.StopTimer()
		for _, p := range pods {
			if _, err := rs.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: p.sandboxID}); err != nil {
				b.Fatal(err)
			}
			if _, err := rs.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: p.sandboxID}); err != nil {
				b.Fatal(err)
			}
		}
		cancel()
		b.StartTimer()
	}
	reportQuantiles(b, "sandbox", sandbox)
	reportQuantiles(b, "create", create)
	reportQuantiles(b, "start", start)
	reportQuantiles(b, "pod", lat)
	reportQuantiles(b, "all30", wall)
	b.ReportMetric(float64(nodeCPU.Microseconds())/1000/float64(n*b.N), "node-cpu-ms/pod")
	b.ReportMetric(1000*cpu/float64(n*b.N), "machine-cpu-ms/pod")
	b.ReportMetric(cpu/span, "machine-busy")
}

// loadavg is the first three fields of /proc/loadavg.
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}

// machineCPU reads the first line of /proc/stat: core-seconds busy and in
// total since boot, over every core.
func machineCPU(b *testing.B) (busy, total float64) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		b.Fatal(err)
	}
	line, _, _ := strings.Cut(string(data), "\n")
	f := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal ...
	if len(f) < 8 || f[0] != "cpu" {
		b.Fatalf("/proc/stat: unexpected first line %q", line)
	}
	for i, v := range f[1:] {
		if i >= 8 { // guest time is already in user
			break
		}
		x, err := strconv.ParseFloat(v, 64)
		if err != nil {
			b.Fatalf("/proc/stat: %v", err)
		}
		total += x
		if i != 3 && i != 4 { // idle, iowait
			busy += x
		}
	}
	const hz = 100 // USER_HZ on Linux
	return busy / hz, total / hz
}
