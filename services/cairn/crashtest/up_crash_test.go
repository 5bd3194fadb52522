package crashtest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/services/cairn/cairntest"
	"github.com/cairn-dev/cairn/services/embedded/endpoints"
	"github.com/cairn-dev/cairn/services/pki"
)

// maxResume is the target: a write made when a restarted server's /readyz
// first says ok is on the log within it.
const maxResume = 2 * time.Second

// restart is what one start of `cairn up` measured.
type restart struct {
	toReady   time.Duration // process start to /readyz ok
	toPublish time.Duration // /readyz ok to a write made then being on the log
}

// TestUpCrash kills `cairn up --node=false` itself with SIGKILL at random
// moments under a concurrent write load (every third restart also kills a
// start before it is ready, as a crash loop does), restarts it on the same
// data directory each time, and requires that readiness tells the truth (when
// /readyz first says ok, a write made then is on the log within maxResume:
// the restarted server's publisher takes over its dead predecessor's
// election at once), and that the log holds every acknowledged write
// exactly once, in order (`cairn events verify` and checkLog).
func TestUpCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cairn and kills processes; skipped with -short")
	}
	bin := cairntest.Build(t)
	dir := t.TempDir()
	cfg := cairntest.UpConfig{Bin: bin, DataDir: dir, Addr: cairntest.FreeAddr(t), StopTimeout: 30 * time.Second,
		Args: []string{"--node=false", "--log-level", "warn"}}
	const (
		workers = 8
		kills   = 10
	)
	var (
		l        *load
		rc       *rest.Config
		restarts []restart
	)
	defer func() {
		if l != nil {
			l.halt()
		}
	}()
	early := 0
	for i := 0; i <= kills; i++ {
		if i%3 == 2 {
			// A crash loop: a start killed before it is ready, maybe
			// holding the election already.
			u := cairntest.StartUp(t, t, cfg)
			time.Sleep(time.Duration(200+rand.IntN(800)) * time.Millisecond)
			u.Stop(t, syscall.SIGKILL)
			early++
		}
		// The files of the starts before, killed or not: this start's
		// replace them (endpoints.Write and the kubeconfig's writer rename
		// a new file into place).
		prevKubeconfig, prevEndpoints := statIfAny(filepath.Join(dir, "kubeconfig")), statIfAny(endpoints.Path(dir))
		started := time.Now()
		u := cairntest.StartUp(t, t, cfg)
		if rc == nil {
			rc = upConfig(t, u, prevKubeconfig)
		}
		hc, err := rest.HTTPClientFor(rc)
		if err != nil {
			t.Fatal(err)
		}
		waitReadyz(t, u, hc, rc.Host+"/readyz")
		r := restart{toReady: time.Since(started)}
		ep := upEndpoints(t, u, prevEndpoints)
		r.toPublish = probe(t, rc, ep, fmt.Sprintf("probe-%d", i))
		hc.CloseIdleConnections()
		restarts = append(restarts, r)
		t.Logf("start %d: ready %v after start, a write made then on the log %v later", i, r.toReady.Round(time.Millisecond), r.toPublish.Round(time.Millisecond))
		if r.toPublish > maxResume {
			t.Errorf("start %d: /readyz said ok, but a write made then reached the log only %v later (want within %v)", i, r.toPublish, maxResume)
		}
		if i == kills {
			l.halt()
			res := l.result()
			l = nil
			checkUpCrash(t, bin, ep, res)
			u.Stop(t, syscall.SIGINT)
			break
		}
		if l == nil {
			l = startLoad(t, rc, workers)
		}
		time.Sleep(time.Duration(300+rand.IntN(1200)) * time.Millisecond)
		u.Stop(t, syscall.SIGKILL)
	}
	t.Logf("%d kills, %d of them before the start was ready", kills+early, early)
	report(t, restarts)
}

// upConfig is the admin's rest.Config of the `cairn up` u started at
// started, from the kubeconfig it writes (the PKI, and so the
// credentials, stay across restarts).
func upConfig(t *testing.T, u *cairntest.Up, prev os.FileInfo) *rest.Config {
	t.Helper()
	waitFile(t, u, u.Kubeconfig(), prev)
	rc, err := clientcmd.BuildConfigFromFlags("", u.Kubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	rc.QPS, rc.Burst, rc.Timeout = -1, -1, 10*time.Second
	return rc
}

// waitReadyz polls url every 10 ms until it answers 200, for up to a minute.
func waitReadyz(t *testing.T, u *cairntest.Up, hc *http.Client, url string) {
	t.Helper()
	u.WaitReady(t, time.Minute, func() error {
		resp, err := hc.Get(url)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("readyz: %s", resp.Status)
		}
		return nil
	})
}

// statIfAny is path's FileInfo, nil if there is no file.
func statIfAny(path string) os.FileInfo {
	fi, err := os.Stat(path)
	if err != nil {
		return nil
	}
	return fi
}

// waitFile waits until path is another file than prev, what the starts
// before this one left (nil: none). A time check cannot tell: a start
// killed before it was ready may have written the file a few milliseconds
// before this one began (it once made the probe dial a dead NATS).
func waitFile(t *testing.T, u *cairntest.Up, path string, prev os.FileInfo) {
	t.Helper()
	u.WaitReady(t, time.Minute, func() error {
		fi, err := os.Stat(path)
		if err != nil {
			return err
		}
		if prev != nil && os.SameFile(fi, prev) {
			return fmt.Errorf("%s is the predecessor's", path)
		}
		return nil
	})
}

// upEndpoints reads where this start's embedded etcd and NATS listen.
func upEndpoints(t *testing.T, u *cairntest.Up, prev os.FileInfo) endpoints.Set {
	t.Helper()
	path := endpoints.Path(u.DataDir)
	waitFile(t, u, path, prev)
	ep, err := endpoints.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	return ep
}

// probe creates a ConfigMap and returns how long after the call it is on
// the log, failing t if it is not there within 30 s.
func probe(t *testing.T, rc *rest.Config, ep endpoints.Set, name string) time.Duration {
	t.Helper()
	start := time.Now()
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cm, err := cs.CoreV1().ConfigMaps(namespace).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("probe write: %v", err)
	}
	rev, err := events.ParseRevision(cm.ResourceVersion)
	if err != nil {
		t.Fatal(err)
	}
	js, closeNATS := connectNATS(t, ep.NATS)
	defer closeNATS()
	if err := events.WaitPublished(ctx, js, rev); err != nil {
		t.Fatalf("probe %s at revision %d: %v", name, rev, err)
	}
	return time.Since(start)
}

func connectNATS(t *testing.T, url string) (jetstream.JetStream, func()) {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		t.Fatal(err)
	}
	return js, nc.Close
}

// checkUpCrash checks the invariants once the load has stopped, with the
// last `cairn up` running.
func checkUpCrash(t *testing.T, bin string, ep endpoints.Set, res loadResult) {
	t.Helper()
	counts := map[string]int{}
	for _, a := range res.acks {
		counts[a.verb]++
	}
	t.Logf("%d acknowledged writes %v, %d failed attempts, %d writes committed with their answer lost",
		len(res.acks), counts, res.failed, res.unseen)
	if counts["create"] < 50 || counts["update"] < 50 || counts["delete"] < 20 {
		t.Errorf("too little load to prove anything: %v", counts)
	}
	if res.failed == 0 {
		t.Error("no write ever failed: the kills did not hit the load")
	}
	verify(t, bin, ep.Etcd[0], ep.NATS)
	js, closeNATS := connectNATS(t, ep.NATS)
	defer closeNATS()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, p := range checkLog(readLog(ctx, t, js), res.acks, pki.AdminUser) {
		t.Error(p)
	}
}

// report logs min, median and max of the restarts' figures (the first
// start, on an empty data directory, is not a restart).
func report(t *testing.T, rs []restart) {
	t.Helper()
	if len(rs) < 2 {
		return
	}
	stat := func(f func(restart) time.Duration) string {
		var ds []time.Duration
		for _, r := range rs[1:] {
			ds = append(ds, f(r))
		}
		slices.Sort(ds)
		return fmt.Sprintf("min %v, median %v, max %v", ds[0].Round(time.Millisecond), ds[len(ds)/2].Round(time.Millisecond), ds[len(ds)-1].Round(time.Millisecond))
	}
	t.Logf("%d restarts: start to ready: %s; ready to a write made then on the log: %s", len(rs)-1,
		stat(func(r restart) time.Duration { return r.toReady }), stat(func(r restart) time.Duration { return r.toPublish }))
}
