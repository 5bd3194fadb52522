package chaostest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/schemas"
)

// readLog is every event of the test's namespace on the log, in revision
// order, read through s with `cairn events tail --no-follow --json`.
func readLog(t testing.TB, s *server) []*events.Event {
	t.Helper()
	r := s.cli(5*time.Minute, "events", "tail", "--no-follow", "--json", "--namespace", namespace)
	if r.Err != nil {
		t.Fatalf("events tail through %s: %v\n%s", s.name, r.Err, r.Stderr)
	}
	var out []*events.Event
	sc := bufio.NewScanner(strings.NewReader(r.Stdout))
	sc.Buffer(make([]byte, 0, 1<<20), 16<<20)
	for sc.Scan() {
		e := &events.Event{}
		if err := json.Unmarshal(sc.Bytes(), e); err != nil {
			t.Fatalf("events tail: %v: %.200s", err, sc.Text())
		}
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// checkAcked: every acked write is in etcd (the object, with the UID the
// write returned, at that state or a later one, read through every
// server) and on the log (an event at the write's revision).
func checkAcked(t testing.TB, ctx context.Context, cs clients, a *acks, log []*events.Event) {
	t.Helper()
	onLog := map[string]bool{} // kind/name@revision
	for _, e := range log {
		onLog[fmt.Sprintf("%s/%s@%d", e.Kind, e.Name, e.Revision)] = true
	}
	missing := 0
	for _, w := range a.all {
		if !onLog[fmt.Sprintf("%s/%s@%s", w.kind, w.name, w.rv)] {
			missing++
			if missing <= 10 {
				t.Errorf("acked write of %s %s (resourceVersion %s) is not on the log", w.kind, w.name, w.rv)
			}
		}
	}
	if missing > 10 {
		t.Errorf("... %d acked writes missing on the log in all", missing)
	}
	for si, c := range cs {
		for _, w := range a.all {
			var uid string
			var err error
			switch w.kind {
			case "Deployment":
				var d *appsv1.Deployment
				if d, err = c.AppsV1().Deployments(namespace).Get(ctx, w.name, metav1.GetOptions{}); err == nil {
					uid = string(d.UID)
					last := a.last[w.name]
					if n, _ := strconv.Atoi(d.Spec.Template.Annotations[revKey]); n < last.rev {
						t.Errorf("server %d: %s at template revision %d, an acked patch set %d", si+1, w.name, n, last.rev)
					}
				}
			case "ConfigMap":
				var cm *corev1.ConfigMap
				if cm, err = c.CoreV1().ConfigMaps(namespace).Get(ctx, w.name, metav1.GetOptions{}); err == nil {
					uid = string(cm.UID)
				}
			case "CronJob":
				var cj *batchv1.CronJob
				if cj, err = c.BatchV1().CronJobs(namespace).Get(ctx, w.name, metav1.GetOptions{}); err == nil {
					uid = string(cj.UID)
				}
			}
			switch {
			case err != nil:
				t.Errorf("server %d: acked %s %s: %v", si+1, w.kind, w.name, err)
			case uid != string(w.uid):
				t.Errorf("server %d: acked %s %s has UID %s, the write returned %s", si+1, w.kind, w.name, uid, w.uid)
			}
		}
	}
	t.Logf("acked writes: %d, all in etcd through every server and on the log", len(a.all))
}

// podOf is what the checks keep of a pod.
type podOf struct {
	rs     string
	active bool // not terminating, not finished
}

// checkRollouts replays the log: no pod is created for a ReplicaSet that
// already has spec.replicas non-terminated pods (a pod created twice, by
// two controller-manager replicas or a stale cache), and at no revision do
// a Deployment's ReplicaSets have more than replicas + maxSurge
// spec.replicas in all (kube's bound). The moments a Deployment had more
// than replicas + maxSurge non-terminated pods are counted and logged:
// kube keeps the bound on the specs only, and status lags the pods (see
// package deployment); it returns the most pods a Deployment had.
func checkRollouts(t testing.TB, log []*events.Event) int {
	t.Helper()
	rsDeploy := map[string]string{} // ReplicaSet -> Deployment
	rsSpec := map[string]int32{}
	pods := map[string]podOf{} // by UID
	most, bad, over := 0, 0, 0
	// The last changes of each Deployment's ReplicaSets and pods, shown
	// with its first violation (for the first three Deployments).
	history := map[string][]string{}
	note := func(d string, e *events.Event, what string) {
		h := append(history[d], fmt.Sprintf("%d %s %s %s %s (%s %s from %s)", e.Revision, e.Type, e.Kind, e.Name, what, e.Verb, e.Actor.User, e.SourceIP))
		if len(h) > 30 {
			h = h[len(h)-30:]
		}
		history[d] = h
	}
	shown := map[string]bool{}
	report := func(d string, format string, args ...any) {
		bad++
		if bad <= 10 {
			t.Errorf(format, args...)
		}
		if d != "" && !shown[d] && len(shown) < 3 {
			shown[d] = true
			t.Logf("the last changes of %s up to that revision:\n%s", d, strings.Join(history[d], "\n"))
		}
	}
	activeOf := func(match func(podOf) bool) int {
		n := 0
		for _, p := range pods {
			if p.active && match(p) {
				n++
			}
		}
		return n
	}
	for _, e := range log {
		switch e.Kind {
		case "Deployment":
			var d appsv1.Deployment
			if err := json.Unmarshal(e.Object, &d); err != nil {
				t.Fatal(err)
			}
			note(d.Name, e, fmt.Sprintf("generation %d template %s", d.Generation, d.Spec.Template.Annotations[revKey]))
		case "ReplicaSet":
			var rs appsv1.ReplicaSet
			if err := json.Unmarshal(e.Object, &rs); err != nil {
				t.Fatal(err)
			}
			if e.Type == events.Deleted {
				delete(rsSpec, rs.Name)
				continue
			}
			if o := metav1.GetControllerOf(&rs); o != nil && o.Kind == "Deployment" {
				rsDeploy[rs.Name] = o.Name
			}
			rsSpec[rs.Name] = ptrVal(rs.Spec.Replicas)
			note(rsDeploy[rs.Name], e, fmt.Sprintf("spec.replicas %d status.replicas %d available %d", rsSpec[rs.Name], rs.Status.Replicas, rs.Status.AvailableReplicas))
			if d := rsDeploy[rs.Name]; d != "" {
				var sum int32
				for r, n := range rsSpec {
					if rsDeploy[r] == d {
						sum += n
					}
				}
				if sum > replicas+surge {
					report(d, "revision %d: Deployment %s's ReplicaSets have spec.replicas %d in all, more than replicas %d + maxSurge %d",
						e.Revision, d, sum, replicas, surge)
				}
			}
		case "Pod":
			var p corev1.Pod
			if err := json.Unmarshal(e.Object, &p); err != nil {
				t.Fatal(err)
			}
			o := metav1.GetControllerOf(&p)
			if o == nil || o.Kind != "ReplicaSet" {
				continue
			}
			if e.Type == events.Deleted {
				delete(pods, string(p.UID))
				note(rsDeploy[o.Name], e, "of "+o.Name)
				continue
			}
			active := p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
			_, known := pods[string(p.UID)]
			pods[string(p.UID)] = podOf{rs: o.Name, active: active}
			note(rsDeploy[o.Name], e, fmt.Sprintf("of %s: phase %s deleting %v ready %v", o.Name, p.Status.Phase, p.DeletionTimestamp != nil, schemas.PodReady(&p)))
			if e.Type == events.Added || !known {
				if n := activeOf(func(q podOf) bool { return q.rs == o.Name }); n > int(rsSpec[o.Name]) {
					report(rsDeploy[o.Name], "revision %d: pod %s created for ReplicaSet %s, which has %d non-terminated pods for spec.replicas %d",
						e.Revision, p.Name, o.Name, n, rsSpec[o.Name])
				}
			}
			d := rsDeploy[o.Name]
			if d == "" {
				continue
			}
			n := activeOf(func(q podOf) bool { return rsDeploy[q.rs] == d })
			most = max(most, n)
			if n > replicas+surge {
				over++
			}
		}
	}
	if bad > 10 {
		t.Errorf("... %d rollout violations in all", bad)
	}
	t.Logf("at %d revisions a Deployment had more than replicas %d + maxSurge %d non-terminated pods (kube bounds the specs only)",
		over, replicas, surge)
	return most
}

func ptrVal(p *int32) int32 {
	if p == nil {
		return 1
	}
	return *p
}

// checkCronJob replays the log: each Job of the CronJob (named by its
// scheduled time) is created once, and with concurrencyPolicy Forbid no
// two of them run at once. It returns how many Jobs fired.
func checkCronJob(t testing.TB, log []*events.Event) int {
	t.Helper()
	created := map[string]int{}
	running := map[string]bool{}
	for _, e := range log {
		if e.Kind != "Job" {
			continue
		}
		var j batchv1.Job
		if err := json.Unmarshal(e.Object, &j); err != nil {
			t.Fatal(err)
		}
		if o := metav1.GetControllerOf(&j); o == nil || o.Kind != "CronJob" || o.Name != cronName {
			continue
		}
		if e.Type == events.Added {
			created[j.Name]++
			if created[j.Name] > 1 {
				t.Errorf("revision %d: Job %s (one scheduled time) created a %d. time", e.Revision, j.Name, created[j.Name])
			}
		}
		done := e.Type == events.Deleted || j.DeletionTimestamp != nil
		for _, c := range j.Status.Conditions {
			if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
				done = true
			}
		}
		if done {
			delete(running, j.Name)
		} else {
			running[j.Name] = true
		}
		if len(running) > 1 {
			t.Errorf("revision %d: Jobs %v of a Forbid CronJob run at once", e.Revision, keys(running))
		}
	}
	return len(created)
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
