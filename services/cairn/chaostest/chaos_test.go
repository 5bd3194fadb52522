package chaostest

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/ops/topologies"
	"github.com/cairn-dev/cairn/services/cairn/cairntest"
	"github.com/cairn-dev/cairn/services/cairn/join"
	"github.com/cairn-dev/cairn/services/kubelet/node"
)

// cmIdentity is the controller-manager replica the test runs as its own
// process (on s3's host), to SIGKILL it.
const cmIdentity = "chaos-cm"

// heal is what one fault took to heal.
type heal struct {
	fault                         string
	writes, published, partitions time.Duration // 0: not measured
}

func (h heal) String() string {
	f := func(d time.Duration) string {
		if d == 0 {
			return "-"
		}
		return d.Round(10 * time.Millisecond).String()
	}
	return fmt.Sprintf("%s: writes accepted again %s, first event published %s, partitions moved %s", h.fault, f(h.writes), f(h.published), f(h.partitions))
}

// TestChaos: see the package documentation.
func TestChaos(tt *testing.T) {
	if testing.Short() {
		tt.Skip("-short: three servers and two nodes in network namespaces")
	}
	t := cairntest.RecordFailures(tt)
	began := time.Now()
	topo := topologies.New(t, "s1", "s2", "s3", "n1", "n2", "r1")
	bin := cairntest.Build(t)
	c := startCluster(t, bin, topo)
	t.Logf("three servers ready after %v: %s %s %s", time.Since(began).Round(time.Second), c.servers[0].id, c.servers[1].id, c.servers[2].id)
	first := c.servers[0]
	first.waitStatus(3*time.Minute, "three members, streams at R3", func(st status) error {
		if err := c.healthy(st); err != nil {
			return err
		}
		if !strings.Contains(st.text, "CAIRN  ") && !strings.Contains(st.text, "CAIRN ") {
			return fmt.Errorf("no CAIRN stream")
		}
		return nil
	})

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()

	// Two hollow nodes join with a token; a controller-manager replica of
	// its own runs on s3's host. It signs CSRs with the cluster CA as the
	// servers' own replicas do: the keys are split among all replicas, and
	// a replica without the CA would approve the CSRs of its keys but
	// never issue them.
	r := first.cli(time.Minute, "token", "create", "--ttl", "1h")
	if r.Err != nil {
		t.Fatalf("token create: %v", r)
	}
	token := strings.TrimSpace(r.Stdout)
	for i, n := range []string{"n1", "n2"} {
		h := topo.Host(n)
		p := cairntest.NewProc(t, "agent-"+n, "ip", append(c.prefix(h)[1:], bin, "agent", "--join", "https://"+c.servers[i].addr(),
			"--join-token", token, "--node-name", "chaos-"+n, "--runtime", "hollow", "--data-dir", t.TempDir())...)
		p.Start()
		defer p.Alive()
	}
	s3 := c.servers[2]
	rnode := startRealNode(t, topo, bin, "https://"+s3.addr(), token)
	cm := cairntest.NewProc(t, "controller-manager", "ip", append(c.prefix(s3.host)[1:], bin, "controller-manager",
		"--data-dir", s3.dir, "--identity", cmIdentity, "--cluster-signing-dir", filepath.Join(s3.dir, "pki"))...)
	cm.Start()

	var cs clients
	for _, s := range c.servers {
		cs = append(cs, s.client(20*time.Second))
	}
	waitFor(t, 3*time.Minute, "three nodes Ready", func() error { return nodesReady(ctx, cs[0], 3) })
	a := &acks{last: map[string]ack{}}
	createWorkload(t, ctx, cs, a)
	waitFor(t, 4*time.Minute, "51 Deployments available", func() error { return converged(ctx, cs[0]) })
	first.waitStatus(time.Minute, "the separate controller-manager holds partitions", func(st status) error {
		if st.owned(cmIdentity) == 0 {
			return fmt.Errorf("%s owns no partition: %v", cmIdentity, st.owners)
		}
		return nil
	})
	t.Logf("workload ready after %v", time.Since(began).Round(time.Second))

	rollCtx, stopRoll := context.WithCancel(ctx)
	ws := &writerStats{}
	rolled := make(chan struct{})
	go func() {
		defer close(rolled)
		roll(rollCtx, cs, a, ws, 400*time.Millisecond)
	}()
	defer func() { stopRoll(); <-rolled }()
	time.Sleep(20 * time.Second)

	var heals []heal
	f := &faults{t: t, ctx: ctx, c: c, cs: cs, a: a}
	st := f.recovered("before the faults")
	heals = append(heals, f.kill("publisher's server SIGKILLed", c.byID(st.publisher)))
	st = f.recovered("after the publisher's server")
	heals = append(heals, f.kill("etcd leader's server SIGKILLed", c.byID(st.etcdLeader)))
	st = f.recovered("after the etcd leader's server")
	heals = append(heals, f.cut(c.byID(st.metaLeader), 20*time.Second))
	f.recovered("after the cut")
	heals = append(heals, f.killCM(cm))
	f.recovered("after the controller-manager")

	time.Sleep(10 * time.Second)
	stopRoll()
	<-rolled
	ws.mu.Lock()
	t.Logf("rolling writer: %d patches acked, %d failed", ws.acked, ws.failed)
	ws.mu.Unlock()
	waitFor(t, 5*time.Minute, "every Deployment rolled out its last template", func() error { return converged(ctx, cs[0]) })

	// The real node stops its pods and containerd on SIGINT.
	rnode.Interrupt(time.Minute)

	// Invariants, on etcd and on the log.
	c.verify("after the faults")
	log := readLog(t, first)
	if n := realPodsRan(log); n < 2 {
		t.Errorf("%d pods ran on the real node %s, want at least the first rollout's 2", n, realNode)
	} else {
		t.Logf("%d pods ran on the real node %s", n, realNode)
	}
	checkAcked(t, ctx, cs, a, log)
	most := checkRollouts(t, log)
	jobs := checkCronJob(t, log)
	t.Logf("log: %d events in namespace %s; the most non-terminated pods of a Deployment %d (replicas %d + maxSurge %d); CronJob fired %d times",
		len(log), namespace, most, replicas, surge, jobs)
	if jobs < 2 {
		t.Errorf("the CronJob fired %d times, want at least 2 in the test's minutes", jobs)
	}
	for _, h := range heals {
		t.Logf("heal: %s", h)
	}
	t.Logf("took %v", time.Since(began).Round(time.Second))
}

// faults injects the faults one at a time and measures their heal.
type faults struct {
	t   testing.TB
	ctx context.Context
	c   *cluster
	cs  clients
	a   *acks
	n   int
}

// recovered waits until every server's etcd member answers, a publisher
// and a meta leader are elected, and returns that status.
func (f *faults) recovered(when string) status {
	f.t.Helper()
	st := f.c.servers[0].waitStatus(3*time.Minute, "healthy "+when, f.c.healthy)
	f.t.Logf("healthy %s: etcd leader %s, publisher %s, meta leader %s, partitions %v", when, st.etcdLeader, st.publisher, st.metaLeader, st.owners)
	return st
}

// afterFault measures, through via, from t0: the first write accepted
// (a ConfigMap created), the log publishing it (cluster status' log
// revision reaches it) and no partition left to gone (when not "").
func (f *faults) afterFault(h *heal, via *server, t0 time.Time, gone string) {
	t := f.t
	t.Helper()
	deadline := t0.Add(3 * time.Minute)
	var rv int64
	for h.writes == 0 {
		f.n++
		name := fmt.Sprintf("marker-%d", f.n)
		if err := marker(f.ctx, f.cs[f.idx(via)], f.a, name); err == nil {
			h.writes = time.Since(t0)
			w := f.a.all[len(f.a.all)-1]
			fmt.Sscan(w.rv, &rv)
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("%s: no write accepted through %s after %v: %v", h.fault, via.name, time.Since(t0), err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	for h.published == 0 || (gone != "" && h.partitions == 0) {
		st, ok := via.status()
		if ok && h.published == 0 && st.published >= rv {
			h.published = time.Since(t0)
		}
		if ok && gone != "" && h.partitions == 0 && st.owned(gone) == 0 && len(st.owners) > 0 {
			h.partitions = time.Since(t0)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: after %v: published %v, partitions moved %v\n%s", h.fault, time.Since(t0), h.published, h.partitions, st.text)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func (f *faults) idx(s *server) int {
	for i, x := range f.c.servers {
		if x == s {
			return i
		}
	}
	return 0
}

// kill SIGKILLs victim, measures the heal through another server and
// restarts it on its data directory.
func (f *faults) kill(fault string, victim *server) heal {
	t := f.t
	t.Helper()
	if victim == nil {
		t.Fatalf("%s: no such server", fault)
	}
	h := heal{fault: fmt.Sprintf("%s (%s)", fault, victim.name)}
	via := f.c.other(victim)
	t0 := time.Now()
	victim.kill()
	f.afterFault(&h, via, t0, victim.id)
	t.Logf("heal: %s", h)
	victim.start()
	return h
}

// cut cuts victim's host off for d and heals it; writes go on through the
// others meanwhile, and after the heal through it too.
func (f *faults) cut(victim *server, d time.Duration) heal {
	t := f.t
	t.Helper()
	if victim == nil {
		t.Fatal("cut: no meta leader's server")
	}
	h := heal{fault: fmt.Sprintf("JetStream meta leader's host cut off for %v (%s)", d, victim.name)}
	via := f.c.other(victim)
	t0 := time.Now()
	victim.host.Cut()
	f.afterFault(&h, via, t0, "")
	if rest := d - time.Since(t0); rest > 0 {
		time.Sleep(rest)
	}
	victim.host.Heal()
	healed := time.Now()
	after := heal{fault: "healed " + victim.name}
	f.afterFault(&after, victim, healed, "")
	t.Logf("heal: %s; through the healed server: writes accepted again %v after the heal, published %v",
		h, after.writes.Round(10*time.Millisecond), after.published.Round(10*time.Millisecond))
	f.c.verify("right after the heal")
	return h
}

// killCM SIGKILLs the separate controller-manager, measures its
// partitions moving to the others, and restarts it.
func (f *faults) killCM(cm *cairntest.Proc) heal {
	t := f.t
	t.Helper()
	h := heal{fault: "controller-manager " + cmIdentity + " SIGKILLed"}
	t0 := time.Now()
	cm.Kill()
	f.afterFault(&h, f.c.servers[0], t0, cmIdentity)
	t.Logf("heal: %s", h)
	cm.Start()
	return h
}

// waitFor polls check until it passes; it fails the test after timeout.
func waitFor(t testing.TB, timeout time.Duration, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %v: %v", what, timeout, err)
		}
		time.Sleep(time.Second)
	}
}

// nodesReady: n nodes are Ready.
func nodesReady(ctx context.Context, c kubernetes.Interface, n int) error {
	l, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	ready := 0
	for _, nd := range l.Items {
		for _, cd := range nd.Status.Conditions {
			if cd.Type == corev1.NodeReady && cd.Status == corev1.ConditionTrue {
				ready++
			}
		}
	}
	if ready < n {
		return fmt.Errorf("%d of %d nodes Ready", ready, len(l.Items))
	}
	return nil
}

// startRealNode joins a real node (its own containerd, runc, the pods'
// network namespace cairn-chaos-r1) on host r1 through server. The agent
// runs in r1's network namespace only (nsenter --net, not `ip netns
// exec`, whose private mount namespace would hide the node's mounts from
// the cleanup), so it reaches the servers over the bridge as the hollow
// nodes do. A cleanup stops what a killed agent left running.
func startRealNode(t testing.TB, topo *topologies.Topology, bin, server, token string) *cairntest.Proc {
	t.Helper()
	h := topo.Host("r1")
	dir := t.TempDir()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cfg := node.Config{Dir: filepath.Join(join.NodeDir(dir, realNode), "node"), NetNS: "cairn-" + realNode}
		if err := node.Clean(ctx, cfg, slog.New(slog.DiscardHandler)); err != nil {
			t.Errorf("stopping what the real node left: %v", err)
		}
	})
	p := cairntest.NewProc(t, "agent-r1", "nsenter", "--net=/run/netns/"+topo.Name+"-r1", bin, "agent", "--join", server,
		"--join-token", token, "--node-name", realNode, "--runtime", "cri", "--data-dir", dir,
		"--address", h.Addr+":10250", "--node-ip", h.Addr)
	p.Start()
	return p
}

// realPodsRan counts the pods that reached Running on the real node,
// from the log.
func realPodsRan(log []*events.Event) int {
	ran := map[string]bool{}
	for _, e := range log {
		if e.Kind != "Pod" || e.NodeName != realNode {
			continue
		}
		var p corev1.Pod
		if json.Unmarshal(e.Object, &p) == nil && p.Status.Phase == corev1.PodRunning {
			ran[p.Name] = true
		}
	}
	return len(ran)
}
