package hatest

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/cairn-dev/cairn/services/cairn/cairntest"
	"github.com/cairn-dev/cairn/services/pki/jointoken"
)

// server is one cairn up of the test cluster, on its own loopback address
// with the same ports as the others.
type server struct {
	addr, dir string
	up        *cairntest.Up
}

// TestThreeServers joins three servers into one cluster (cairn up
// --cluster-init, then --join with the server token) on 127.0.0.2-4, and
// checks: a join with a wrong token or another cluster's CA is refused in
// one line with nothing written and no etcd member added; a write through
// server 2 is read through server 3; cluster status lists three etcd
// members, three NATS peers and the streams at three replicas; events
// verify passes on each; with server 3 SIGKILLed writes go on through the
// others; cluster remove takes it out (two members, streams back at one
// replica); server 2 restarted without --join or token serves again.
func TestThreeServers(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three servers")
	}
	bin := cairntest.Build(t)
	api, ports := clusterPorts(t)
	root := t.TempDir()
	servers := make([]*server, 3)
	for i := range servers {
		servers[i] = &server{addr: net.JoinHostPort(fmt.Sprintf("127.0.0.%d", i+2), api), dir: filepath.Join(root, fmt.Sprintf("s%d", i+1))}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	start := func(s *server, extra ...string) {
		t.Helper()
		startServer(t, ctx, bin, s, append(ports, extra...))
	}
	first := servers[0]
	start(first, "--cluster-init")
	tok, err := jointoken.Read(first.dir)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(first.up.Stdout(), tok.String()) {
		t.Errorf("the server token is not printed:\n%s", first.up.Stdout())
	}
	joinURL := "https://" + first.addr

	// Bad input: refused in one line, nothing written, no member added.
	wrongSecret := jointoken.Token{CAHash: tok.CAHash, ID: tok.ID, Secret: strings.Repeat("x", 16)}
	otherCA := jointoken.Token{CAHash: strings.Repeat("0", 64), ID: tok.ID, Secret: tok.Secret}
	for _, c := range []struct{ name, token, want string }{
		{"wrong token", wrongSecret.String(), "refused the join token"},
		{"other CA", otherCA.String(), "not the one the token names"},
	} {
		dir := filepath.Join(root, "refused")
		r := cairntest.Run(t, time.Minute, bin, append([]string{"up", "--data-dir", dir, "--listen", net.JoinHostPort("127.0.0.9", api),
			"--node=false", "--join", joinURL, "--join-token", c.token}, ports...)...)
		if r.Err == nil || !strings.Contains(r.Stderr, c.want) || strings.Count(strings.TrimSpace(r.Stderr), "\n") > 0 {
			t.Errorf("%s: want one line with %q, got %v:\n%s", c.name, c.want, r.Err, r.Stderr)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("%s: the data directory was written (%v)", c.name, err)
		}
	}
	if n := strings.Count(status(t, bin, first.dir), "started"); n != 1 {
		t.Fatalf("after the refused joins: %d started etcd members, want 1", n)
	}

	for _, s := range servers[1:] {
		start(s, "--join", joinURL, "--join-token", tok.String())
	}

	// A write through server 2 is read through server 3.
	c2, c3 := client(t, servers[1]), client(t, servers[2])
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "through-2", Namespace: "default"}, Data: map[string]string{"k": "v"}}
	if _, err := c2.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := c3.CoreV1().ConfigMaps("default").Get(ctx, "through-2", metav1.GetOptions{})
	if err != nil || got.Data["k"] != "v" {
		t.Fatalf("read through server 3: %v %v", got, err)
	}

	// Three etcd voters, three NATS peers, streams at R3.
	names := serverNames(t, servers)
	waitStatus(t, bin, first.dir, 3*time.Minute, func(st string) error {
		for _, n := range names {
			if !strings.Contains(st, n) {
				return fmt.Errorf("server %s not listed", n)
			}
		}
		if n := strings.Count(st, " started "); n != 3 {
			return fmt.Errorf("%d started etcd members, want 3", n)
		}
		if n := strings.Count(st, "learner"); n != 0 {
			return fmt.Errorf("%d learners", n)
		}
		if n := countLines(st, "current"); n < 3 {
			return fmt.Errorf("%d current NATS peers, want 3", n)
		}
		for _, s := range []string{"CAIRN ", "CAIRN_LEASES "} {
			if !hasLine(st, s, "3") {
				return fmt.Errorf("stream %snot at 3 replicas", s)
			}
		}
		return nil
	})
	for _, s := range servers {
		if r := cairntest.Run(t, 2*time.Minute, bin, "events", "verify", "--data-dir", s.dir); r.Err != nil {
			t.Errorf("events verify on %s: %v", s.dir, r)
		}
	}

	// SIGKILL server 3: writes go on through the others.
	servers[2].up.Stop(t, syscall.SIGKILL)
	for i, s := range servers[:2] {
		c := client(t, s)
		deadline := time.Now().Add(90 * time.Second)
		for {
			_, err := c.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
				Name: fmt.Sprintf("after-kill-%d", i), Namespace: "default"}}, metav1.CreateOptions{})
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("write through server %d with server 3 killed: %v", i+1, err)
			}
			time.Sleep(time.Second)
		}
	}

	// Remove it: two etcd members, streams back to one replica.
	if r := cairntest.Run(t, 3*time.Minute, bin, "cluster", "remove", names[2], "--data-dir", first.dir); r.Err != nil {
		t.Fatalf("cluster remove: %v", r)
	}
	waitStatus(t, bin, first.dir, 2*time.Minute, func(st string) error {
		if strings.Contains(st, names[2]) {
			return fmt.Errorf("server %s still listed", names[2])
		}
		if n := strings.Count(st, " started "); n != 2 {
			return fmt.Errorf("%d started etcd members, want 2", n)
		}
		if !hasLine(st, "CAIRN ", "1") {
			return fmt.Errorf("stream CAIRN not at 1 replica")
		}
		return nil
	})

	// Server 2 stopped: etcd has no quorum (one of two members), so no
	// server can be removed; the removal is refused at once, in one line,
	// and leaves server 2 listed.
	servers[1].up.Stop(t, syscall.SIGTERM)
	r := cairntest.Run(t, time.Minute, bin, "cluster", "remove", names[1], "--data-dir", first.dir)
	if r.Err == nil || !strings.Contains(r.Stderr, "etcd has no quorum") || strings.Count(strings.TrimSpace(r.Stderr), "\n") > 0 {
		t.Errorf("cluster remove with etcd's quorum lost: want one line with %q, got %v:\n%s", "etcd has no quorum", r.Err, r.Stderr)
	}

	// Server 2 restarted on its data directory, without --join or token.
	start(servers[1])
	waitStatus(t, bin, first.dir, 2*time.Minute, func(st string) error {
		if !strings.Contains(st, names[1]) {
			return fmt.Errorf("server %s no longer listed", names[1])
		}
		if n := strings.Count(st, " started "); n != 2 {
			return fmt.Errorf("%d started etcd members, want 2", n)
		}
		return nil
	})
	if _, err := client(t, servers[1]).CoreV1().ConfigMaps("default").Get(ctx, "after-kill-0", metav1.GetOptions{}); err != nil {
		t.Fatalf("read through the restarted server 2: %v", err)
	}
	// The publisher's election lapsed while etcd had no quorum: verify
	// until the new one has caught up with etcd.
	for _, s := range servers[:2] {
		deadline := time.Now().Add(2 * time.Minute)
		for {
			r := cairntest.Run(t, 2*time.Minute, bin, "events", "verify", "--data-dir", s.dir)
			if r.Err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("events verify on %s: %v", s.dir, r)
				break
			}
			time.Sleep(2 * time.Second)
		}
	}
}

// TestClusterInitRestartsAlone: the first server of a cluster that no
// other server joined (cairn up --cluster-init) restarts on its data
// directory and serves reads, writes and the log: nothing routes to its
// NATS server, whose clustered JetStream would otherwise wait for a
// route (package embedded, TestNATSRestartAlone).
func TestClusterInitRestartsAlone(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a server")
	}
	bin := cairntest.Build(t)
	api, ports := clusterPorts(t)
	s := &server{addr: net.JoinHostPort("127.0.0.2", api), dir: filepath.Join(t.TempDir(), "s1")}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	startServer(t, ctx, bin, s, append(ports, "--cluster-init"))
	if _, err := client(t, s).CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name: "before", Namespace: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	s.up.Stop(t, syscall.SIGTERM)
	startServer(t, ctx, bin, s, ports)
	c := client(t, s)
	if _, err := c.CoreV1().ConfigMaps("default").Get(ctx, "before", metav1.GetOptions{}); err != nil {
		t.Fatalf("read after the restart: %v", err)
	}
	if _, err := c.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name: "after", Namespace: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("write after the restart: %v", err)
	}
	if r := cairntest.Run(t, 2*time.Minute, bin, "events", "verify", "--data-dir", s.dir); r.Err != nil {
		t.Errorf("events verify after the restart: %v", r)
	}
}

// serverNames are the servers' names (their server-id files).
func serverNames(t testing.TB, servers []*server) []string {
	t.Helper()
	names := make([]string, len(servers))
	for i, s := range servers {
		b, err := os.ReadFile(filepath.Join(s.dir, "server-id"))
		if err != nil {
			t.Fatal(err)
		}
		names[i] = strings.TrimSpace(string(b))
	}
	return names
}

// clusterPorts picks the apiserver port and the etcd and NATS port flags
// that every server of a test cluster shares, each server on its own
// loopback address.
func clusterPorts(t testing.TB) (api string, flags []string) {
	port := func() string {
		_, p, _ := net.SplitHostPort(cairntest.FreeAddr(t))
		return p
	}
	api, ec, ep, np, nc := port(), port(), port(), port(), port()
	return api, []string{"--etcd-client-port", ec, "--etcd-peer-port", ep, "--nats-port", np, "--nats-cluster-port", nc}
}

// startServer starts s as `cairn up --node=false` with flags and waits
// until its apiserver is ready.
func startServer(t testing.TB, ctx context.Context, bin string, s *server, flags []string) {
	t.Helper()
	s.up = cairntest.StartUp(t, t, cairntest.UpConfig{Bin: bin, DataDir: s.dir, Addr: s.addr, StopTimeout: 30 * time.Second,
		Args: append([]string{"--node=false"}, flags...)})
	s.up.WaitReady(t, 3*time.Minute, func() error { return readyz(ctx, s.up.Kubeconfig()) })
}

func readyz(ctx context.Context, kubeconfig string) error {
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	c, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	_, err = c.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	return err
}

func client(t *testing.T, s *server) kubernetes.Interface {
	t.Helper()
	rc, err := clientcmd.BuildConfigFromFlags("", s.up.Kubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	return kubernetes.NewForConfigOrDie(rc)
}

func status(t testing.TB, bin, dir string) string {
	t.Helper()
	r := cairntest.Run(t, time.Minute, bin, "cluster", "status", "--data-dir", dir)
	if r.Err != nil {
		t.Fatalf("cluster status: %v", r)
	}
	return r.Stdout
}

// waitStatus polls cluster status until check passes.
func waitStatus(t testing.TB, bin, dir string, timeout time.Duration, check func(string) error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		st := status(t, bin, dir)
		err := check(st)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("cluster status: %v:\n%s", err, st)
		}
		time.Sleep(2 * time.Second)
	}
}

// hasLine: a line starts with prefix and its second field is field.
func hasLine(s, prefix, field string) bool {
	for _, l := range strings.Split(s, "\n") {
		if f := strings.Fields(l); strings.HasPrefix(l, prefix) && len(f) > 1 && f[1] == field {
			return true
		}
	}
	return false
}

// tableRows are the fields of each row of cluster status' table whose
// header line starts with header, up to the blank line (or the NATS PEER
// table's "JetStream meta leader:" line) that ends it.
func tableRows(status, header string) [][]string {
	var rows [][]string
	in := false
	for _, l := range strings.Split(status, "\n") {
		switch {
		case strings.HasPrefix(l, header):
			in = true
		case in && (strings.TrimSpace(l) == "" || strings.HasPrefix(l, "JetStream")):
			in = false
		case in:
			rows = append(rows, strings.Fields(l))
		}
	}
	return rows
}

// countLines counts the NATS PEER table's lines whose state is state.
func countLines(s, state string) int {
	n := 0
	for _, f := range tableRows(s, "NATS PEER") {
		if len(f) >= 3 && f[2] == state {
			n++
		}
	}
	return n
}
