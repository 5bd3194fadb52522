package publish_test

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/events/publish"
)

// helperEnv carries "<etcd endpoint> <nats url>" to the child publisher.
const helperEnv = "CAIRN_EVENTS_TEST_PUBLISHER"

// TestHelperPublisherProcess is not a test: it is the child publisher
// process of TestPublisherCrash, which runs the test binary again with this
// test selected and helperEnv set, and kills it with SIGKILL.
func TestHelperPublisherProcess(t *testing.T) {
	addrs := strings.Fields(os.Getenv(helperEnv))
	if len(addrs) != 2 {
		t.Skip("only run by TestPublisherCrash")
	}
	// Never outlive the parent by much.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{addrs[0]}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	nc, err := nats.Connect(addrs[1])
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	p := publish.NewPublisher(cli, js, publish.PublisherConfig{SessionTTL: 2 * time.Second}, testLogger(t))
	if err := p.Run(ctx); err != nil {
		t.Fatal(err)
	}
}

// childPublisher starts the test binary as a publisher process.
func childPublisher(t *testing.T, e *env) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperPublisherProcess$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), helperEnv+"="+e.etcd.Endpoint()+" "+e.nats.URL())
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, &out
}

// revokeLeader revokes the election lease of a killed publisher, as its TTL
// would, but without the wait.
func revokeLeader(t *testing.T, cli *clientv3.Client) {
	t.Helper()
	resp, err := cli.Get(context.Background(), publish.DefaultPublisherElection, clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range resp.Kvs {
		_, _ = cli.Revoke(context.Background(), clientv3.LeaseID(kv.Lease))
	}
}

// waitAdvance waits until the log has passed revision before.
func waitAdvance(t *testing.T, e *env, before events.Revision, out *bytes.Buffer) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		last, err := events.LastPublishedRevision(context.Background(), e.js)
		if err != nil {
			t.Fatal(err)
		}
		if last > before {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the child publisher never published:\n%s", out.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestPublisherCrash kills publisher processes with SIGKILL at random
// moments, under a continuous write load and a compactor, and then requires
// the log to be exactly once, in order, with no gap.
func TestPublisherCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("kills processes; skipped with -short")
	}
	e := newEnv(t)
	comp := publish.NewCompactor(e.cli, e.js, publish.CompactorConfig{Interval: 300 * time.Millisecond}, testLogger(t))
	cctx, cstop := context.WithCancel(context.Background())
	cdone := make(chan struct{})
	go func() {
		defer close(cdone)
		_ = comp.Run(cctx)
	}()
	defer func() { cstop(); <-cdone }()

	w := startWriter(t, e.cli, 200*time.Microsecond)
	const kills = 20
	var published []events.Revision
	for i := range kills {
		before, err := events.LastPublishedRevision(context.Background(), e.js)
		if err != nil {
			t.Fatal(err)
		}
		cmd, out := childPublisher(t, e)
		if i%2 == 1 {
			// Wait until it publishes, so that the kill hits a busy pipeline.
			waitAdvance(t, e, before, out)
		}
		// Sometimes before it leads, mostly while it publishes.
		time.Sleep(time.Duration(rand.IntN(500)) * time.Millisecond)
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
		if strings.Contains(out.String(), "panic") || strings.Contains(out.String(), "--- FAIL") {
			t.Fatalf("child %d failed:\n%s", i, out.String())
		}
		if i%4 != 3 {
			// Every fourth successor waits out the dead leader's TTL.
			revokeLeader(t, e.cli)
		}
		last, err := events.LastPublishedRevision(context.Background(), e.js)
		if err != nil {
			t.Fatal(err)
		}
		published = append(published, last)
	}
	if published[len(published)-1] == published[0] {
		t.Fatalf("the log never advanced: %v", published)
	}

	// A last publisher catches up after the writes stop.
	w.halt()
	cmd, out := childPublisher(t, e)
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("last child:\n%s", out.String())
		}
	}()
	last, n := w.lastRev()
	e.waitPublished(t, last)
	rep := verifyOK(t, e)
	t.Logf("%d kills, %d writes; log after each kill: %v; %d events, %d lease events; history (%d, %d]",
		kills, n, published, rep.Events, rep.LeaseEvents, rep.CompactRevision, rep.HeadRevision)
	if rep.CompactRevision == 0 {
		t.Error("the compactor never compacted")
	}
}
