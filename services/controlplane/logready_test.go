package controlplane_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/events/publish"
	"github.com/cairn-dev/cairn/services/apiserver"
	"github.com/cairn-dev/cairn/services/controlplane"
	"github.com/cairn-dev/cairn/services/embedded/embeddedtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// logEnv is etcd and NATS with the streams, for a LogCheck.
type logEnv struct {
	etcd *embeddedtest.Etcd
	nats *embeddedtest.NATS
	js   jetstream.JetStream
}

func newLogEnv(t *testing.T) *logEnv {
	t.Helper()
	e := &logEnv{etcd: embeddedtest.StartEtcd(t), nats: embeddedtest.StartNATS(t)}
	var err error
	if e.js, err = jetstream.New(e.nats.Conn); err != nil {
		t.Fatal(err)
	}
	if err := events.EnsureStreams(t.Context(), e.js, events.StreamConfig{}); err != nil {
		t.Fatal(err)
	}
	return e
}

// write commits a ConfigMap write the way the apiserver does, its
// WriteMeta at events.MetaKey, made at the given time.
func (e *logEnv) write(t *testing.T, name string, at time.Time) {
	t.Helper()
	key := "/registry/configmaps/default/" + name
	m, _ := json.Marshal(events.WriteMeta{ID: name, Verb: "create", Key: key, Time: at})
	obj := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"` + name + `","namespace":"default","uid":"u-` + name + `"}}`
	if _, err := e.etcd.Client.Txn(t.Context()).Then(clientv3.OpPut(key, obj), clientv3.OpPut(events.MetaKey, string(m))).Commit(); err != nil {
		t.Fatal(err)
	}
}

// runPublisher runs p until the test ends.
func runPublisher(t *testing.T, p *publish.Publisher) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = p.Run(ctx)
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// TestLogCheck walks the log's readiness through what a server meets at
// start: no election yet, its own dead predecessor's key, a live leader of
// another identity that does not publish, and its own publisher leading.
func TestLogCheck(t *testing.T) {
	e := newLogEnv(t)
	const self = "server-self"
	pub := publish.NewPublisher(e.etcd.Client, e.js, publish.PublisherConfig{Identity: self, SessionTTL: 2 * time.Second}, nil)
	check := &controlplane.LogCheck{Etcd: e.etcd.Client, JS: e.js, Publisher: pub, MaxLag: time.Second}
	expect := func(step string, want error) controlplane.LogState {
		t.Helper()
		st, err := check.Check(t.Context())
		if !errors.Is(err, want) || (want == nil) != (err == nil) {
			t.Fatalf("%s: Check = %+v, %v; want %v", step, st, err, want)
		}
		return st
	}

	expect("before the first election", controlplane.ErrNoPublisher)
	e.write(t, "before", time.Now())
	expect("before the first election, a write waiting", controlplane.ErrNoPublisher)

	dead := embeddedtest.StartCandidate(t, e.etcd.Endpoint(), publish.DefaultPublisherElection, self, 10*time.Second)
	dead.Abandon(t)
	expect("own identity's key under a dead session", controlplane.ErrNoPublisher)
	dead.Resign()
	if _, err := e.etcd.Client.Delete(t.Context(), dead.Key); err != nil { // as its ttl would
		t.Fatal(err)
	}

	// A live leader of another identity that never publishes: the write
	// waiting since before counts against it once older than MaxLag.
	// A long lease: under load a short one may lapse before the checks
	// below, and this server would publish early. It resigns explicitly.
	other := embeddedtest.StartCandidate(t, e.etcd.Endpoint(), publish.DefaultPublisherElection, "server-other", 15*time.Second)
	check.MaxLag = time.Minute // however slow the steps above were
	if st := expect("other leader, lag within the bound", nil); st.Leader != "server-other" || st.Local {
		t.Errorf("state %+v, want server-other leading elsewhere", st)
	}
	check.MaxLag = time.Second
	time.Sleep(1200 * time.Millisecond)
	e.write(t, "fresh", time.Now()) // the lag is the oldest write's, not the newest's
	st := expect("other leader, not publishing", controlplane.ErrPublishLag)
	if st.Head == 0 || st.Log != 0 || st.Lag < time.Second {
		t.Errorf("state %+v, want the log at 0 behind etcd, lag over 1s", st)
	}

	// This server's publisher waits in line, then leads once the other
	// resigns, and catches up.
	runPublisher(t, pub)
	time.Sleep(200 * time.Millisecond)
	expect("own publisher waiting behind the other", controlplane.ErrPublishLag)
	other.Resign()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	st, err := check.WaitCaughtUp(ctx, 10*time.Millisecond, nil)
	if err != nil {
		t.Fatalf("not ready after the other resigned: %v", err)
	}
	if !st.Local || st.Leader != self || st.Log < st.Head {
		t.Errorf("ready state %+v, want this publisher leading, caught up", st)
	}
}

// TestReadyzLog starts a control plane while a live server of another
// identity holds the publisher election and never publishes: the apiserver
// answers, but /readyz fails on its log check (the bootstrap writes wait),
// and neither the log nor the apiserver is reported ready (Start does not
// return) until that server resigns.
func TestReadyzLog(t *testing.T) {
	e := newLogEnv(t)
	// A long lease: under load a short one may lapse before the checks
	// below, and this server would publish early. It resigns explicitly.
	other := embeddedtest.StartCandidate(t, e.etcd.Endpoint(), publish.DefaultPublisherElection, "server-other", 15*time.Second)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	readyLines := make(chan string, 8)
	type started struct {
		cp  *controlplane.ControlPlane
		err error
	}
	startc := make(chan started, 1)
	go func() {
		cp, err := controlplane.Start(t.Context(), controlplane.Config{
			DataDir: t.TempDir(), EtcdEndpoints: []string{e.etcd.Endpoint()}, NATSURL: e.nats.URL(), Listener: ln,
			Identity: "server-self", MaxPublishLag: 500 * time.Millisecond, ElectionTTL: 2 * time.Second,
			Authenticator: apiserver.TokenAuthenticator{},
			OnReady: func(c, d string) {
				if c == "log" || c == "apiserver" {
					readyLines <- c + " (" + d + ")"
				}
			},
		})
		startc <- started{cp, err}
	}()
	url := "http://" + ln.Addr().String() + "/readyz?verbose"
	// The apiserver serves /readyz while Start waits for the log; under
	// load its etcd check may take a moment to pass: ask until it does.
	var code int
	var body string
	for deadline := time.Now().Add(30 * time.Second); ; {
		code, body = get(t, url)
		if code == http.StatusServiceUnavailable && strings.Contains(body, "[+]etcd ok") || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "[-]log failed: ") || !strings.Contains(body, "[+]etcd ok") {
		t.Fatalf("/readyz with another leader not publishing: %d\n%s", code, body)
	}
	select {
	case l := <-readyLines:
		t.Fatalf("%s reported ready while the log is not", l)
	case s := <-startc:
		t.Fatalf("Start returned while the log is not ready: %v", s.err)
	default:
	}

	other.Resign()
	var s started
	select {
	case s = <-startc:
	case <-time.After(10 * time.Second):
		t.Fatal("Start did not return 10s after the other leader resigned")
	}
	if s.err != nil {
		t.Fatal(s.err)
	}
	defer s.cp.Close()
	if code, body = get(t, url); code != http.StatusOK || !strings.Contains(body, "[+]log ok") {
		t.Errorf("/readyz once Start returned: %d\n%s", code, body)
	}
	var lines []string
	for len(readyLines) > 0 {
		lines = append(lines, <-readyLines)
	}
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "log (") || !strings.HasPrefix(lines[1], "apiserver (") {
		t.Errorf("ready lines %q, want the log's then the apiserver's", lines)
	}
	t.Logf("%q", lines)
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
