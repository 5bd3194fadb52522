package uptest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/cairn-dev/cairn/services/cairn/cairntest"
	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
	"github.com/cairn-dev/cairn/services/procstat"
)

// podValue is the raw puts' value size: about a stored bench pod (as
// bench:api's baseline).
const podValue = 1536

// BenchmarkUp is bench:up (package documentation).
func BenchmarkUp(b *testing.B) {
	pods, procs, clients := envInt("BENCH_UP_PODS", 20000), envInt("BENCH_UP_PROCS", 8), envInt("BENCH_UP_CLIENTS", 64)
	codecs := strings.Split(envString("BENCH_UP_CODECS", "protobuf,json"), ",")
	bin := cairntest.Build(b)
	dir := b.TempDir()
	for i := 0; i < b.N; i++ {
		etcd, endpoint := startEtcd(b, filepath.Join(dir, fmt.Sprintf("etcd-%d", i)))
		b.Logf("load before: %s", loadavg())

		etcd0 := procUsage(b, etcd.Process.Pid)
		puts, putsTime, _ := load(b, procs, clients, pods, []string{"CAIRN_UPBENCH_ROLE=" + rolePut,
			"CAIRN_UPBENCH_TARGET=" + endpoint, "CAIRN_UPBENCH_PREFIX=/bench/" + strconv.Itoa(i) + "/",
			"CAIRN_UPBENCH_SIZE=" + strconv.Itoa(podValue)})
		putRate := float64(pods) / putsTime.Seconds()
		putEtcdCPU := procUsage(b, etcd.Process.Pid).cpu - etcd0.cpu
		b.Logf("raw etcd: %d puts by %d writers in %d processes in %v: %.0f puts/s, p99 %v, etcd CPU %.0f µs/put",
			pods, clients, procs, putsTime.Round(time.Millisecond), putRate, quantile(puts, 0.99), us(putEtcdCPU, pods))

		up := cairntest.StartUp(b, b, cairntest.UpConfig{Bin: bin, DataDir: filepath.Join(dir, fmt.Sprintf("up-%d", i)),
			Addr: cairntest.FreeAddr(b), StopTimeout: time.Minute,
			Args: append([]string{"--node=false", "--etcd-endpoints", endpoint}, strings.Fields(os.Getenv("BENCH_UP_FLAGS"))...)})
		cs := waitReady(b, up)
		// Let start-up settle: partitions spread, caches filled.
		time.Sleep(10 * time.Second)

		for _, codec := range codecs {
			churn0 := readChurn(b, cs)
			up0, etcd0 := procUsage(b, up.Pid()), procUsage(b, etcd.Process.Pid)
			if dir := os.Getenv("BENCH_UP_PROFILE"); dir != "" {
				go profile(b, cs, filepath.Join(dir, codec+".pprof"))
			}
			lat, elapsed, clientCPU := load(b, procs, clients, pods, []string{"CAIRN_UPBENCH_ROLE=" + roleCreate,
				"CAIRN_UPBENCH_TARGET=" + up.Kubeconfig(), "CAIRN_UPBENCH_PREFIX=" + codec + strconv.Itoa(i),
				"CAIRN_UPBENCH_CODEC=" + codec})
			up1, etcd1 := procUsage(b, up.Pid()), procUsage(b, etcd.Process.Pid)
			// The pipeline's churn includes what the creates left to do
			// after the last was acknowledged (publish, schedule attempts).
			time.Sleep(5 * time.Second)
			churn := readChurn(b, cs).Sub(churn0)
			rate := float64(pods) / elapsed.Seconds()
			p50, p99 := quantile(lat, 0.5), quantile(lat, 0.99)
			b.Logf("%s: %d creates by %d clients in %d processes in %v: %.0f creates/s (p50 %v, p99 %v), %.2f of the raw put rate; load %s",
				codec, pods, clients, procs, elapsed.Round(time.Millisecond), rate, p50, p99, rate/putRate, loadavg())
			b.Logf("%s: CPU per create: cairn up %.0f µs, etcd %.0f µs, load clients %.0f µs; peak RSS cairn up %d MiB, etcd %d MiB",
				codec, us(up1.cpu-up0.cpu, pods), us(etcd1.cpu-etcd0.cpu, pods), us(clientCPU, pods), up1.hwm>>20, etcd1.hwm>>20)
			b.Logf("%s: churn %s", codec, churn)
			b.ReportMetric(rate, codec+"-creates/s")
			b.ReportMetric(ms(p50), codec+"-p50-ms")
			b.ReportMetric(ms(p99), codec+"-p99-ms")
			b.ReportMetric(rate/putRate, codec+"-ratio")
			b.ReportMetric(us(up1.cpu-up0.cpu, pods), codec+"-up-cpu-us/create")
			b.ReportMetric(us(etcd1.cpu-etcd0.cpu, pods), codec+"-etcd-cpu-us/create")
			b.ReportMetric(churn.PublisherTermsLost, codec+"-publisher-terms-lost")
			b.ReportMetric(churn.PartitionsLost, codec+"-partitions-lost")
			lagP99, _ := churn.LagQuantile(0.99)
			b.ReportMetric(lagP99, codec+"-lag-p99-s")
		}
		b.ReportMetric(putRate, "etcd-puts/s")
		up.Stop(b, syscall.SIGTERM)
	}
}

// startEtcd starts this binary as an etcd member process on a free port
// (stopped with the benchmark) and returns it with its endpoint.
func startEtcd(b *testing.B, dir string) (*exec.Cmd, string) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "CAIRN_UPBENCH_ROLE="+roleEtcd, "CAIRN_UPBENCH_DIR="+dir, "CAIRN_UPBENCH_ADDR="+cairntest.FreeAddr(b))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		b.Fatalf("etcd process: %v", err)
	}
	return cmd, strings.TrimSpace(line)
}

// load runs procs processes of this binary in role env, sharing n
// operations and clients clients between them, and returns every
// operation's latency, the time from the first start to the last end,
// and the processes' CPU.
func load(b *testing.B, procs, clients, n int, env []string) ([]time.Duration, time.Duration, time.Duration) {
	type child struct {
		cmd *exec.Cmd
		out bytes.Buffer
	}
	children := make([]*child, procs)
	for p := range children {
		share, cl := n/procs, clients/procs
		if p < n%procs {
			share++
		}
		if p < clients%procs {
			cl++
		}
		c := &child{cmd: exec.Command(os.Args[0], "-test.run=^$")}
		c.cmd.Env = append(append(os.Environ(), env...), "CAIRN_UPBENCH_N="+strconv.Itoa(share),
			"CAIRN_UPBENCH_CLIENTS="+strconv.Itoa(cl), "CAIRN_UPBENCH_PREFIX="+prefixOf(env)+"p"+strconv.Itoa(p))
		c.cmd.Stdout, c.cmd.Stderr = &c.out, os.Stderr
		children[p] = c
	}
	for _, c := range children {
		if err := c.cmd.Start(); err != nil {
			b.Fatal(err)
		}
	}
	var lat []time.Duration
	var first, last time.Time
	var cpu time.Duration
	for p, c := range children {
		if err := c.cmd.Wait(); err != nil {
			b.Fatalf("load process %d: %v", p, err)
		}
		ru := c.cmd.ProcessState.SysUsage().(*syscall.Rusage)
		cpu += time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		var r result
		if err := json.Unmarshal(c.out.Bytes(), &r); err != nil {
			b.Fatalf("load process %d: %v: %q", p, err, c.out.String())
		}
		if r.Errors > 0 {
			b.Fatalf("load process %d: %d of %d failed; first: %s", p, r.Errors, len(r.Latencies), r.FirstError)
		}
		if first.IsZero() || r.Start.Before(first) {
			first = r.Start
		}
		if r.End.After(last) {
			last = r.End
		}
		for _, l := range r.Latencies {
			lat = append(lat, time.Duration(l))
		}
	}
	return lat, last.Sub(first), cpu
}

// prefixOf is the CAIRN_UPBENCH_PREFIX of env ("" without one).
func prefixOf(env []string) string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "CAIRN_UPBENCH_PREFIX="); ok {
			return v
		}
	}
	return ""
}

func waitReady(b *testing.B, up *cairntest.Up) kubernetes.Interface {
	var cs kubernetes.Interface
	up.WaitReady(b, 3*time.Minute, func() error {
		rc, err := clientcmd.BuildConfigFromFlags("", up.Kubeconfig())
		if err != nil {
			return err
		}
		c, err := kubernetes.NewForConfig(rc)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := c.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx); err != nil {
			return err
		}
		cs = c
		return nil
	})
	return cs
}

// readChurn reads the pipeline's counters from cairn up's /metrics.
func readChurn(b *testing.B, cs kubernetes.Interface) controlplanetest.Churn {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	raw, err := cs.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		b.Fatalf("metrics: %v", err)
	}
	c, err := controlplanetest.ParseChurn(bytes.NewReader(raw))
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// profile writes a 30 s CPU profile of cairn up, taken from its
// apiserver's /debug/pprof/profile, to path (BENCH_UP_PROFILE: the
// directory for one per codec, started with the creates).
func profile(b *testing.B, cs kubernetes.Interface, path string) {
	raw, err := cs.Discovery().RESTClient().Get().AbsPath("/debug/pprof/profile").Param("seconds", "30").DoRaw(context.Background())
	if err == nil {
		err = os.WriteFile(path, raw, 0o644)
	}
	if err != nil {
		b.Logf("profile: %v", err)
	}
}

// usage is a process's CPU so far and its peak RSS (bytes).
type usage struct {
	cpu time.Duration
	hwm int64
}

// procUsage reads pid's CPU (utime+stime of /proc/PID/stat, in clock
// ticks of 10 ms) and VmHWM.
func procUsage(b *testing.B, pid int) usage {
	st, err := procstat.Read(pid)
	if err != nil {
		b.Fatal(err)
	}
	u := usage{cpu: st.CPU()}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.Lines(string(status)) {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			u.hwm = kb << 10
		}
	}
	return u
}

func quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

func us(d time.Duration, n int) float64 { return float64(d.Nanoseconds()) / 1e3 / float64(n) }

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func envString(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}
