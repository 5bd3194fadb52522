package chaostest

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/cairn-dev/cairn/ops/topologies"
	"github.com/cairn-dev/cairn/services/cairn/cairntest"
	"github.com/cairn-dev/cairn/services/netns"
	"github.com/cairn-dev/cairn/services/pki/jointoken"
)

// apiPort is every server's apiserver port, on its host's address (each
// host has its own namespace, so etcd and NATS keep their default ports).
const apiPort = "6443"

// cluster is three servers (hosts s1-s3) and the hosts of the nodes.
type cluster struct {
	t       testing.TB
	bin     string
	topo    *topologies.Topology
	servers []*server
}

// server is one `cairn up --node=false` on its own host.
type server struct {
	name string // the host's name, s1..s3
	id   string // the server's identity (server-id): etcd member, NATS server, publisher
	host *topologies.Host
	dir  string
	up   *cairntest.Up
	c    *cluster
}

// prefix runs a command inside h's network namespace.
func (c *cluster) prefix(h *topologies.Host) []string {
	return []string{"ip", "netns", "exec", c.topo.Name + "-" + h.Name}
}

// startCluster starts s1 with --cluster-init and joins s2 and s3 to it
// with its server token.
func startCluster(t testing.TB, bin string, topo *topologies.Topology) *cluster {
	t.Helper()
	c := &cluster{t: t, bin: bin, topo: topo}
	root := t.TempDir()
	for i := range 3 {
		name := fmt.Sprintf("s%d", i+1)
		c.servers = append(c.servers, &server{name: name, host: topo.Host(name), dir: filepath.Join(root, name), c: c})
	}
	first := c.servers[0]
	first.start("--cluster-init")
	tok, err := jointoken.Read(first.dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range c.servers[1:] {
		s.start("--join", "https://"+first.addr(), "--join-token", tok.String())
	}
	for _, s := range c.servers {
		b, err := os.ReadFile(filepath.Join(s.dir, "server-id"))
		if err != nil {
			t.Fatal(err)
		}
		s.id = strings.TrimSpace(string(b))
	}
	return c
}

func (s *server) addr() string { return s.host.Addr + ":" + apiPort }

// start runs cairn up on the server's data directory (again after a
// kill: without --join, as a restarted server rejoins) and waits until
// its apiserver is ready. The kubernetes Service's endpoints list the
// host's address, from which joined nodes learn every server.
func (s *server) start(extra ...string) {
	t := s.c.t
	t.Helper()
	s.up = cairntest.StartUp(t, t, cairntest.UpConfig{Bin: s.c.bin, DataDir: s.dir, Addr: s.addr(), StopTimeout: 30 * time.Second,
		Prefix: s.c.prefix(s.host), Args: append([]string{"--node=false", "--advertise-address", s.host.Addr}, extra...)})
	s.up.WaitReady(t, 4*time.Minute, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := s.client(10 * time.Second).Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err
	})
	// Recovered means every service of the server runs again, the
	// controller-manager's caches synced from the log too, not only the
	// apiserver: a server whose controller-manager finds JetStream
	// unavailable while it syncs exits (see the package documentation).
	s.up.WaitReady(t, 4*time.Minute, func() error {
		if !strings.Contains(s.up.Stdout(), "services ready") {
			return fmt.Errorf("not every service ready")
		}
		return nil
	})
}

// kill SIGKILLs the server.
func (s *server) kill() { s.up.Stop(s.c.t, syscall.SIGKILL) }

// restConfig is the server's admin kubeconfig, dialled from inside its
// host: the test reaches each server also while its host is cut off.
func (s *server) restConfig(timeout time.Duration) *rest.Config {
	rc, err := clientcmd.BuildConfigFromFlags("", s.up.Kubeconfig())
	if err != nil {
		s.c.t.Fatal(err)
	}
	rc.Dial = netns.Dialer(s.host.NS)
	rc.Timeout, rc.QPS, rc.Burst = timeout, -1, -1
	return rc
}

func (s *server) client(timeout time.Duration) kubernetes.Interface {
	return kubernetes.NewForConfigOrDie(s.restConfig(timeout))
}

// cli runs `cairn ARGS --data-dir <the server's>` inside its host.
func (s *server) cli(timeout time.Duration, args ...string) cairntest.Result {
	t := s.c.t
	t.Helper()
	argv := append(append(s.c.prefix(s.host)[1:], s.c.bin), append(args, "--data-dir", s.dir)...)
	return cairntest.Run(t, timeout, "ip", argv...)
}

// status is `cairn cluster status` through s, parsed; ok is false (and
// text says why) when the command failed.
func (s *server) status() (st status, ok bool) {
	r := s.cli(30*time.Second, "cluster", "status")
	if r.Err != nil {
		return status{text: r.String()}, false
	}
	return parseStatus(r.Stdout), true
}

// status is what the test reads of `cairn cluster status`.
type status struct {
	text string
	// etcdStarted are the started etcd members that answered.
	etcdStarted []string
	etcdLeader  string
	metaLeader  string
	publisher   string
	published   int64 // the log's last revision
	// owners counts each identity's partitions over every shard group.
	owners map[string]int
}

var publishedRE = regexp.MustCompile(`log at revision (\d+)`)

func parseStatus(text string) status {
	st := status{text: text, owners: map[string]int{}}
	section := ""
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		l := sc.Text()
		f := strings.Fields(l)
		switch {
		case len(f) == 0:
			section = ""
			continue
		case strings.HasPrefix(l, "ETCD MEMBER"), strings.HasPrefix(l, "SHARD GROUP"), strings.HasPrefix(l, "NATS PEER"), strings.HasPrefix(l, "STREAM"):
			section = f[0]
			continue
		case strings.HasPrefix(l, "JetStream meta leader:"):
			st.metaLeader = strings.TrimSpace(strings.TrimPrefix(l, "JetStream meta leader:"))
			continue
		case strings.HasPrefix(l, "log publisher:"):
			rest := strings.TrimSpace(strings.TrimPrefix(l, "log publisher:"))
			if id, _, _ := strings.Cut(rest, ","); !strings.HasPrefix(id, "(none") {
				st.publisher = id
			}
			if m := publishedRE.FindStringSubmatch(l); m != nil {
				st.published, _ = strconv.ParseInt(m[1], 10, 64)
			}
			continue
		}
		switch section {
		case "ETCD":
			// NAME PEER-URLS CLIENT-URLS STATE [(unreachable)] LEADER REVISION
			if len(f) >= 6 && f[3] == "started" && f[4] != "(unreachable)" {
				st.etcdStarted = append(st.etcdStarted, f[0])
				if f[4] == "true" {
					st.etcdLeader = f[0]
				}
			}
		case "SHARD":
			// GROUP OWNER N: P,P,...
			if len(f) >= 3 {
				n, _ := strconv.Atoi(strings.TrimSuffix(f[2], ":"))
				st.owners[f[1]] += n
			}
		}
	}
	return st
}

// owned counts the partitions of every owner whose identity has id in it
// (a replica may name itself after its server).
func (st status) owned(id string) int {
	n := 0
	for o, k := range st.owners {
		if strings.Contains(o, id) {
			n += k
		}
	}
	return n
}

// byID is the server whose identity is id, nil if none.
func (c *cluster) byID(id string) *server {
	for _, s := range c.servers {
		if s.id == id {
			return s
		}
	}
	return nil
}

// other is a server other than every one of not.
func (c *cluster) other(not ...*server) *server {
	for _, s := range c.servers {
		ok := true
		for _, n := range not {
			ok = ok && s != n
		}
		if ok {
			return s
		}
	}
	c.t.Fatal("no other server")
	return nil
}

// waitStatus polls cluster status through s until check passes and
// returns that status; it fails the test after timeout.
func (s *server) waitStatus(timeout time.Duration, what string, check func(status) error) status {
	t := s.c.t
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		st, ok := s.status()
		err := fmt.Errorf("cluster status failed")
		if ok {
			err = check(st)
		}
		if err == nil {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not so %v after %v: %v\n%s", what, s.name, timeout, err, st.text)
		}
		time.Sleep(time.Second)
	}
}

// healthy: three etcd members answer, a publisher is elected, a meta
// leader is known and the log is no more than a few revisions behind.
func (c *cluster) healthy(st status) error {
	switch {
	case len(st.etcdStarted) != 3:
		return fmt.Errorf("etcd members answering: %v", st.etcdStarted)
	case st.etcdLeader == "":
		return fmt.Errorf("no etcd leader")
	case st.publisher == "" || c.byID(st.publisher) == nil:
		return fmt.Errorf("publisher %q", st.publisher)
	case st.metaLeader == "":
		return fmt.Errorf("no JetStream meta leader")
	}
	return nil
}

// verify runs `cairn events verify` through every server until it
// passes, for up to two minutes each (right after a heal JetStream may
// answer 503 and the publisher may be catching up), as partitiontest does.
func (c *cluster) verify(when string) {
	t := c.t
	t.Helper()
	for _, s := range c.servers {
		start := time.Now()
		var r cairntest.Result
		for {
			r = s.cli(2*time.Minute, "events", "verify")
			if r.Err == nil || time.Since(start) > 2*time.Minute {
				break
			}
			time.Sleep(2 * time.Second)
		}
		if r.Err != nil {
			t.Errorf("%s: events verify through %s: %v", when, s.name, r)
			continue
		}
		t.Logf("%s: events verify through %s ok after %v: %s", when, s.name, time.Since(start).Round(100*time.Millisecond),
			strings.Join(strings.Fields(r.Stdout), " "))
	}
}
