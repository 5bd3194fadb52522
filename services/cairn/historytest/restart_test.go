package historytest

import (
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/projections/history/audit"
	"github.com/cairn-dev/cairn/projections/history/timeline"
	"github.com/cairn-dev/cairn/services/cairn/cairntest"
)

// waitTimeout bounds each wait for the cluster: generous, for a loaded
// machine.
const waitTimeout = 120 * time.Second

// deployment is the manifest kubectl applies.
const deployment = `{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"},
"spec": {"replicas": 5, "selector": {"matchLabels": {"app": "web"}}, "template": {"metadata": {"labels": {"app": "web"}},
"spec": {"containers": [{"name": "app", "image": "busybox:1"}]}}}}`

// waitPods waits until the pods of the web Deployment satisfy ok.
func waitPods(t *testing.T, cs kubernetes.Interface, what string, ok func([]corev1.Pod) bool) {
	t.Helper()
	for deadline := time.Now().Add(waitTimeout); ; time.Sleep(200 * time.Millisecond) {
		l, err := cs.CoreV1().Pods("default").List(t.Context(), metav1.ListOptions{LabelSelector: "app=web"})
		if err == nil && ok(l.Items) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pods: not %s after %s (%v)", what, waitTimeout, err)
		}
	}
}

// running counts the running pods of image.
func running(pods []corev1.Pod, image string) int {
	n := 0
	for _, p := range pods {
		if p.Status.Phase == corev1.PodRunning && p.Spec.Containers[0].Image == image {
			n++
		}
	}
	return n
}

// TestRestart stops cairn twice mid-rollout (SIGTERM, then SIGKILL),
// finishes the rollouts, and checks that the history projection caught up
// and holds every event of the log exactly once; then replays the log into
// a second data directory and serves it. See doc.go.
func TestRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cairn and runs cairn up; skipped with -short")
	}
	cairntest.KubectlPath(t)
	bin := cairntest.Build(t)
	dir, addr := filepath.Join(t.TempDir(), "data"), cairntest.FreeAddr(t)

	u := startUp(t, bin, dir, addr)
	admin, err := clientFor(u.Up.Kubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	registerNode(t, admin)
	k := startKubelet(t, u.Up.Kubeconfig(), 2)
	u.kubectl(t, deployment, "apply", "-f", "-")
	waitPods(t, admin, "5 pods, 2 running", func(ps []corev1.Pod) bool { return len(ps) == 5 && running(ps, "busybox:1") == 2 })
	u.Stop(t, syscall.SIGTERM)

	u = startUp(t, bin, dir, addr)
	k.allow(5)
	u.kubectl(t, "", "rollout", "status", "deployment/web", "--timeout=120s")
	k.allow(6)
	u.kubectl(t, "", "set", "image", "deployment/web", "app=busybox:2")
	waitPods(t, admin, "running the new image", func(ps []corev1.Pod) bool { return running(ps, "busybox:2") == 1 })
	u.Stop(t, syscall.SIGKILL)

	u = startUp(t, bin, dir, addr)
	k.allow(1 << 20)
	u.kubectl(t, "", "rollout", "status", "deployment/web", "--timeout=120s")
	waitPods(t, admin, "5 pods of the new image", func(ps []corev1.Pod) bool { return len(ps) == 5 && running(ps, "busybox:2") == 5 })

	log := readLog(t, u, bin)
	t.Run("audit holds every event once", func(t *testing.T) { checkAudit(t, u, bin, log) })
	t.Run("timeline holds every event of the chain once", func(t *testing.T) { checkTimeline(t, u, bin, log) })
	t.Run("replay serves the objects of the revision", func(t *testing.T) { checkReplay(t, u, bin, log) })
	u.Stop(t, syscall.SIGTERM)
}

// readLog reads the whole log with `cairn events tail --no-follow --json`
// and waits until the history projection has reached its last revision.
func readLog(t *testing.T, u *up, bin string) []*events.Event {
	t.Helper()
	out := u.cairn(t, bin, "events", "tail", "--no-follow", "--json")
	var log []*events.Event
	dec := json.NewDecoder(strings.NewReader(out))
	for {
		var e events.Event
		if err := dec.Decode(&e); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("events tail: %v", err)
		}
		log = append(log, &e)
	}
	if len(log) == 0 {
		t.Fatal("events tail: empty log")
	}
	head := log[len(log)-1].Revision
	for deadline := time.Now().Add(waitTimeout); ; time.Sleep(200 * time.Millisecond) {
		if tl := timelineOf(t, u, bin); tl.Head >= head {
			t.Logf("log: %d events up to revision %d; projection at %d", len(log), head, tl.Head)
			return log
		} else if time.Now().After(deadline) {
			t.Fatalf("projection at revision %d, log at %d after %s", tl.Head, head, waitTimeout)
		}
	}
}

func timelineOf(t *testing.T, u *up, bin string) *timeline.Timeline {
	t.Helper()
	var tl timeline.Timeline
	if err := json.Unmarshal([]byte(u.cairn(t, bin, "timeline", "deployment/web", "-o", "json")), &tl); err != nil {
		t.Fatalf("timeline: %v", err)
	}
	return &tl
}

// exactlyOnce reports the events of log not among ids exactly once, and
// the ids not on log.
func exactlyOnce(t *testing.T, what string, log []*events.Event, ids []string) {
	t.Helper()
	seen := map[string]int{}
	for _, id := range ids {
		seen[id]++
	}
	inLog := map[string]bool{}
	for _, e := range log {
		inLog[e.ID] = true
		if n := seen[e.ID]; n != 1 {
			t.Errorf("%s: event %s (revision %d, %s %s/%s %s) %d times, want once", what, e.ID, e.Revision, e.Verb,
				e.Resource, e.Name, e.Type, n)
		}
	}
	for id := range seen {
		if !inLog[id] {
			t.Errorf("%s: event %s is not on the log", what, id)
		}
	}
}

// checkAudit: the unfiltered audit, up to the log's head, is the log.
func checkAudit(t *testing.T, u *up, bin string, log []*events.Event) {
	var res audit.Result
	if err := json.Unmarshal([]byte(u.cairn(t, bin, "audit", "-o", "json")), &res); err != nil {
		t.Fatal(err)
	}
	head := log[len(log)-1].Revision
	var ids []string
	for _, s := range res.Entries {
		if s.Pos.Rev <= head {
			ids = append(ids, s.ID)
		}
	}
	exactlyOnce(t, "audit", log, ids)
	// kubectl's two writes of the Deployment, by the admin user.
	if err := json.Unmarshal([]byte(u.cairn(t, bin, "audit", "--user", "cairn-admin", "--kind", "deployments", "-o", "json")), &res); err != nil {
		t.Fatal(err)
	}
	var verbs []string
	for _, s := range res.Entries {
		verbs = append(verbs, s.Verb)
	}
	if len(verbs) != 2 || verbs[0] != "create" || verbs[1] != "patch" {
		t.Errorf("audit --user cairn-admin --kind deployments: %v, want [create patch]", verbs)
	}
}

// checkTimeline: every object of the Deployment's chain has each of its
// events on the log once, in log order, and nothing else.
func checkTimeline(t *testing.T, u *up, bin string, log []*events.Event) {
	tl := timelineOf(t, u, bin)
	byUID := map[string][]string{}
	for _, e := range log {
		byUID[e.UID] = append(byUID[e.UID], e.ID)
	}
	kinds := map[string]int{}
	var all []string
	for i, o := range tl.Objects {
		kinds[o.Kind]++
		var ids []string
		for _, s := range tl.Steps {
			if s.Object == i {
				ids = append(ids, s.EventID)
			}
		}
		all = append(all, ids...)
		if (o.Role == "root" || o.Role == "descendant") && !reflect.DeepEqual(ids, byUID[o.UID]) {
			t.Errorf("%s: steps %v, want the log's %v", o.Title(), ids, byUID[o.UID])
		}
	}
	var chain []*events.Event
	for _, e := range log {
		if slices.Contains(all, e.ID) {
			chain = append(chain, e)
		}
	}
	exactlyOnce(t, "timeline", chain, all)
	if kinds["Deployment"] != 1 || kinds["ReplicaSet"] != 2 || kinds["Pod"] != 10 {
		t.Errorf("timeline rows %v, want 1 Deployment, 2 ReplicaSets and 10 Pods", kinds)
	}
	for i := 1; i < len(tl.Steps); i++ {
		if !tl.Steps[i-1].Pos.Less(tl.Steps[i].Pos) {
			t.Errorf("steps %d and %d out of log order: %v, %v", i-1, i, tl.Steps[i-1].Pos, tl.Steps[i].Pos)
		}
	}
}

// checkReplay replays the log up to the revision before the image change
// into a new data directory, serves it with a second `cairn up`, and
// compares what both list at that revision; then `cairn events verify`
// must pass there.
func checkReplay(t *testing.T, u *up, bin string, log []*events.Event) {
	var rev events.Revision
	for _, e := range log {
		if e.Resource == "deployments" && e.Verb == "patch" {
			rev = e.Revision - 1
		}
	}
	if rev == 0 {
		t.Fatal("no kubectl set image on the log")
	}
	dir := filepath.Join(t.TempDir(), "replayed")
	out := cairn(t, bin, "replay", "--to", rev.String(), "--data-dir", dir, "--from-data-dir", u.DataDir)
	t.Logf("%s", strings.TrimSpace(out))
	u2 := startUp(t, bin, dir, cairntest.FreeAddr(t))
	for _, path := range []string{"/apis/apps/v1/namespaces/default/deployments", "/apis/apps/v1/namespaces/default/replicasets",
		"/api/v1/namespaces/default/pods", "/api/v1/nodes"} {
		q := fmt.Sprintf("%s?resourceVersion=%d&resourceVersionMatch=Exact", path, rev)
		want, got := listItems(t, u.kubectl(t, "", "get", "--raw", q)), listItems(t, u2.kubectl(t, "", "get", "--raw", q))
		if len(want) == 0 {
			t.Errorf("%s: nothing at revision %d", path, rev)
		}
		if !reflect.DeepEqual(want, got) {
			t.Errorf("%s at %d: replayed\n%v\nwant\n%v", path, rev, got, want)
		}
	}
	var r cairntest.Result
	for deadline := time.Now().Add(waitTimeout); time.Now().Before(deadline); time.Sleep(time.Second) {
		if r = cairntest.Run(t, callTimeout, bin, "events", "verify", "--data-dir", dir); r.Err == nil {
			t.Logf("verify of the replayed directory: %s", strings.TrimSpace(r.Stdout))
			break
		}
	}
	if r.Err != nil {
		t.Errorf("verify of the replayed directory: %s", r)
	}
	u2.Stop(t, syscall.SIGTERM)
}

// listItems decodes a list's items by name.
func listItems(t *testing.T, raw string) map[string]map[string]any {
	t.Helper()
	var l struct {
		Items []map[string]any `json:"items"`
	}
	if err := json.Unmarshal([]byte(raw), &l); err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]any{}
	for _, it := range l.Items {
		md, _ := it["metadata"].(map[string]any)
		name, _ := md["name"].(string)
		out[name] = it
	}
	return out
}
