package partitiontest

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/cairn-dev/cairn/events/publish"
	"github.com/cairn-dev/cairn/ops/topologies"
	"github.com/cairn-dev/cairn/services/cairn/cairntest"
	"github.com/cairn-dev/cairn/services/netns"
)

// cluster is n servers, server i on host s<i> of its own topology.
type cluster struct {
	t       *testing.T
	topo    *topologies.Topology
	servers []*server
}

type server struct {
	t    *testing.T
	name string
	host *topologies.Host
	proc *cairntest.Proc
}

// startCluster starts n servers one after another (each etcd member joins
// through the first) and waits until every apiserver serves.
func startCluster(t *testing.T, n int) *cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: servers in network namespaces")
	}
	var names []string
	for i := range n {
		names = append(names, fmt.Sprintf("s%d", i+1))
	}
	c := &cluster{t: t, topo: topologies.New(t, names...)}
	var all []string
	for _, name := range names {
		all = append(all, c.topo.Host(name).Addr)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for i, name := range names {
		h := c.topo.Host(name)
		cfg := serverConfig{Name: name, Addr: h.Addr, Dir: t.TempDir(), All: all}
		if i > 0 {
			cfg.First = all[0]
		}
		b, _ := json.Marshal(cfg)
		s := &server{t: t, name: name, host: h, proc: cairntest.NewProc(t, name, "ip", "netns", "exec", c.topo.Name+"-"+name,
			self, "-test.run=^$", "-partitiontest.server="+string(b))}
		s.proc.Start()
		c.servers = append(c.servers, s)
		s.waitLine("etcd ready", 2*time.Minute)
	}
	for _, s := range c.servers {
		s.waitLine("apiserver ready", 2*time.Minute)
	}
	return c
}

// waitLine waits until the server's output has line.
func (s *server) waitLine(line string, timeout time.Duration) {
	s.t.Helper()
	deadline := time.Now().Add(timeout)
	for !strings.Contains(s.proc.Output(), line) {
		s.proc.Alive()
		if time.Now().After(deadline) {
			s.t.Fatalf("%s: no %q after %v:\n%s", s.name, line, timeout, s.proc.Output())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// client is a clientset for the server's apiserver that dials from inside
// the server's own host: it reaches the server also while the host is cut
// off, as a client next to it would.
func (s *server) client(t *testing.T, timeout time.Duration) *kubernetes.Clientset {
	t.Helper()
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: "http://" + s.host.Addr + ":" + apiPort, BearerToken: adminToken,
		Dial: netns.Dialer(s.host.NS), Timeout: timeout, QPS: -1, Burst: -1})
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// verify runs the log's Verify (what `cairn events verify` does) against
// etcd through via and the log through every server's NATS.
func (c *cluster) verify(ctx context.Context, via *server) {
	t := c.t
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"http://" + via.host.Addr + ":" + etcdClientPort}, DialTimeout: 10 * time.Second,
		DialOptions: []grpc.DialOption{grpc.WithContextDialer(func(ctx context.Context, addr string) (netConn, error) {
			return netns.DialContext(ctx, via.host.NS, "tcp", addr)
		})}})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	for _, s := range c.servers {
		nc, err := nats.Connect(fmt.Sprintf("nats://%s:%d", s.host.Addr, natsPort), nats.SetCustomDialer(nsDialer{s.host.NS}))
		if err != nil {
			t.Fatalf("nats %s: %v", s.name, err)
		}
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		// Right after a heal JetStream may answer 503 "temporarily
		// unavailable", and the publisher may still be catching up: the
		// log is checked until it verifies, for up to two minutes.
		var rep *publish.Report
		deadline := time.Now().Add(2 * time.Minute)
		for {
			rep, err = publish.Verify(ctx, cli, js)
			if err == nil && rep.OK() || time.Now().After(deadline) {
				break
			}
			time.Sleep(time.Second)
		}
		nc.Close()
		if err != nil {
			t.Fatalf("verify through %s: %v", s.name, err)
		}
		if !rep.OK() {
			var b strings.Builder
			_ = rep.Write(&b)
			t.Fatalf("verify through %s:\n%s", s.name, b.String())
		}
		t.Logf("verify through %s: ok, %d events", s.name, rep.Events)
	}
}

type netConn = net.Conn

// nsDialer dials inside a network namespace, for nats.SetCustomDialer.
type nsDialer struct{ ns string }

func (d nsDialer) Dial(network, addr string) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return netns.DialContext(ctx, d.ns, network, addr)
}
