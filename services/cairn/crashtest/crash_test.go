package crashtest

import (
	"bytes"
	"context"
	"errors"
	"github.com/cairn-dev/cairn/services/cairn/cairntest"
	"math/rand/v2"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/services/embedded/embeddedtest"
)

// TestAPIServerCrash kills `cairn apiserver` (and with it its publisher)
// with SIGKILL at random moments under a concurrent write load, restarts it
// each time, and then requires the log to hold every committed revision
// exactly once, in order, and every acknowledged write as acknowledged.
func TestAPIServerCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cairn and kills processes; skipped with -short")
	}
	bin := cairntest.Build(t)
	etcd := embeddedtest.StartEtcdFsync(t)
	nt := embeddedtest.StartNATS(t)
	js, err := jetstream.New(nt.Conn)
	if err != nil {
		t.Fatal(err)
	}
	addr := cairntest.FreeAddr(t)
	proc := newAPIServerProc(t, bin, etcd.Endpoint(), nt.URL(), addr)
	proc.Start()
	proc.WaitHTTPReady("http://" + addr + "/readyz")

	const (
		workers = 8
		kills   = 20
	)
	l := startLoad(t, tokenConfig(addr), workers)
	halted := false
	defer func() {
		if !halted {
			l.halt()
		}
	}()
	var logAfterKill []events.Revision
	for i := range kills {
		if i%3 == 2 {
			// Let this child's publisher take the lead (after the dead
			// leaders' sessions expire) and publish, so the kill hits a
			// busy publisher rather than one still campaigning.
			waitAdvance(t, js, last(t, js), 15*time.Second)
		}
		time.Sleep(time.Duration(200+rand.IntN(1300)) * time.Millisecond)
		proc.Kill()
		logAfterKill = append(logAfterKill, last(t, js))
		proc.Start()
		proc.WaitHTTPReady("http://" + addr + "/readyz")
	}
	l.halt()
	halted = true

	res := l.result()
	acks := res.acks
	counts := map[string]int{}
	for _, a := range acks {
		counts[a.verb]++
	}
	t.Logf("%d kills; %d acknowledged writes %v, %d failed attempts, %d writes committed with their answer lost; log after each kill: %v",
		kills, len(acks), counts, res.failed, res.unseen, logAfterKill)
	if counts["create"] < 50 || counts["update"] < 50 || counts["delete"] < 20 {
		t.Errorf("too little load to prove anything: %v", counts)
	}
	if res.failed == 0 {
		t.Error("no write ever failed: the kills did not hit the load")
	}

	// The last child's publisher catches up once its predecessor's
	// election session has expired.
	head := lastWrite(t, etcd.Client)
	waitAdvance(t, js, head-1, 30*time.Second)
	verify(t, bin, etcd.Endpoint(), nt.URL())

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	log := readLog(ctx, t, js)
	for _, p := range checkLog(log, acks, adminUser) {
		t.Error(p)
	}
	t.Logf("%d events on the log up to revision %d", len(log), head)
}

// last is the revision of the newest event on the log.
func last(t *testing.T, js jetstream.JetStream) events.Revision {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rev, err := events.LastPublishedRevision(ctx, js)
	if err != nil {
		t.Fatal(err)
	}
	return rev
}

// waitAdvance waits until the log has passed revision before.
func waitAdvance(t *testing.T, js jetstream.JetStream, before events.Revision, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		rev := last(t, js)
		if rev > before {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the log stayed at revision %d for %v, want past %d", rev, timeout, before)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// lastWrite is the revision of the last apiserver write: every apiserver
// transaction also puts its metadata at events.MetaKey.
func lastWrite(t *testing.T, cli *clientv3.Client) events.Revision {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, events.MetaKey)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) == 0 {
		t.Fatal("no apiserver write in etcd")
	}
	return events.Revision(resp.Kvs[0].ModRevision)
}

// verify runs `cairn events verify` until it passes, for up to 20s (the
// log may still be catching up with changes that are not apiserver writes).
func verify(t *testing.T, bin, etcdURL, natsURL string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		var out bytes.Buffer
		cmd := exec.CommandContext(ctx, bin, "events", "verify", "--etcd-endpoints", etcdURL, "--nats-url", natsURL)
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		cancel()
		if err == nil {
			t.Logf("cairn events verify:\n%s", strings.TrimSpace(out.String()))
			return
		}
		var exit *exec.ExitError
		if !errors.As(err, &exit) || time.Now().After(deadline) {
			t.Fatalf("cairn events verify: %v\n%s", err, out.String())
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
