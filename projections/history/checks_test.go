package history_test

import (
	"context"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/events/publish"
	"github.com/cairn-dev/cairn/projections/history/audit"
	"github.com/cairn-dev/cairn/projections/history/latency"
	"github.com/cairn-dev/cairn/projections/history/replay"
	"github.com/cairn-dev/cairn/projections/history/store"
	"github.com/cairn-dev/cairn/projections/history/timeline"
	"github.com/cairn-dev/cairn/projections/history/travel"
	"github.com/cairn-dev/cairn/services/apiserver"
	"github.com/cairn-dev/cairn/services/cairn/clustertest"
	"github.com/cairn-dev/cairn/services/controlplane"
)

var webKey = store.ObjKey{Group: "apps", Resource: "deployments", Namespace: "default", Name: "web"}

// TestRolloutHistory runs a rollout of a 5-replica Deployment, a scale, an
// image change, a rollback and a delete through the real controllers, then
// checks the timeline, audit, time travel and replay against it.
func TestRolloutHistory(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a control plane with controllers; skipped with -short")
	}
	reg := prometheus.NewRegistry()
	lat, err := latency.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	c := clustertest.StartCluster(t, lat)
	s := runScenario(t, c)
	t.Run("timeline of the deployment", func(t *testing.T) { checkDeploymentTimeline(t, s) })
	t.Run("timeline of a pod", func(t *testing.T) { checkPodTimeline(t, s) })
	t.Run("audit by user", func(t *testing.T) { checkAudit(t, s) })
	t.Run("state at each revision", func(t *testing.T) { checkAt(t, s) })
	t.Run("replay", func(t *testing.T) { checkReplay(t, s) })
	t.Run("metrics", func(t *testing.T) { checkMetrics(t, reg) })
}

// checkMetrics: every pod was scheduled and started, and each of alice's
// four spec changes became ready, once each.
func checkMetrics(t *testing.T, reg *prometheus.Registry) {
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]uint64{
		"cairn_pod_creation_to_scheduled_seconds": 11,
		"cairn_pod_scheduled_to_running_seconds":  11,
		"cairn_deployment_apply_to_ready_seconds": 4,
	}
	for _, mf := range mfs {
		min, ok := want[mf.GetName()]
		if !ok {
			continue
		}
		delete(want, mf.GetName())
		h := mf.GetMetric()[0].GetHistogram()
		t.Logf("%s: %d observations, sum %.3fs", mf.GetName(), h.GetSampleCount(), h.GetSampleSum())
		if h.GetSampleCount() < min {
			t.Errorf("%s: %d observations, want >= %d", mf.GetName(), h.GetSampleCount(), min)
		}
	}
	for name := range want {
		t.Errorf("%s not exported", name)
	}
}

func buildTimeline(t *testing.T, st *store.Store, opts timeline.Options) *timeline.Timeline {
	t.Helper()
	var tl *timeline.Timeline
	err := st.View(func(tx *store.Tx) (err error) {
		tl, err = timeline.Build(tx, opts)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return tl
}

func checkDeploymentTimeline(t *testing.T, s *scenario) {
	tl := buildTimeline(t, s.c.Store, timeline.Options{Key: webKey})
	var rsRows, podRows []int
	for i, o := range tl.Objects {
		switch o.Kind {
		case "ReplicaSet":
			rsRows = append(rsRows, i)
		case "Pod":
			podRows = append(podRows, i)
		}
	}
	if tl.Objects[0].Kind != "Deployment" || len(rsRows) != 2 || len(podRows) < 11 {
		t.Fatalf("rows: root %s, %d replicasets (want 2), %d pods (want >= 11)", tl.Objects[0].Kind, len(rsRows), len(podRows))
	}
	var aliceClasses []string
	for i, st := range tl.Steps {
		if st.CauseKind == "causation" && st.Cause >= i {
			t.Errorf("step %d (%s) caused by later step %d", i, st.What, st.Cause)
		}
		if i > 0 && !tl.Steps[i-1].Pos.Less(st.Pos) {
			t.Errorf("step %d at %s not after %s", i, st.Pos, tl.Steps[i-1].Pos)
		}
		if st.LatencyMS < 0 {
			t.Errorf("step %d: negative latency %v", i, st.LatencyMS)
		}
		if st.Object == 0 && st.Actor == clustertest.Alice {
			aliceClasses = append(aliceClasses, st.Class)
		}
	}
	want := []string{timeline.ClassCreate, timeline.ClassScale, timeline.ClassRollout, timeline.ClassRollout, timeline.ClassDelete}
	if !slices.Equal(aliceClasses, want) {
		t.Errorf("alice's deployment steps %v, want %v", aliceClasses, want)
	}
	for _, row := range rsRows {
		first := stepsOf(tl, row)[0]
		if first.Class != timeline.ClassCreate || first.Actor != apiserver.UserControllers ||
			first.CauseKind != "causation" || tl.Steps[first.Cause].Object != 0 {
			t.Errorf("replicaset %s: first step %+v, want created by the controllers because of the deployment",
				tl.Objects[row].Name, first)
		}
	}
	for _, row := range podRows {
		checkPodSteps(t, tl, row)
	}
	var text strings.Builder
	_ = tl.WriteHeader(&text)
	_, _ = tl.WriteSteps(&text, store.Pos{})
	t.Logf("timeline (%d steps):\n%s", len(tl.Steps), firstLines(text.String(), 40))
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	return strings.Join(lines[:min(n, len(lines))], "\n")
}

func stepsOf(tl *timeline.Timeline, row int) []timeline.Step {
	var out []timeline.Step
	for _, s := range tl.Steps {
		if s.Object == row {
			out = append(out, s)
		}
	}
	return out
}

// checkPodSteps: created by the controllers, bound by the scheduler
// because of the creation, started by the kubelet because of the binding,
// deleted last.
func checkPodSteps(t *testing.T, tl *timeline.Timeline, row int) {
	t.Helper()
	steps := stepsOf(tl, row)
	name := tl.Objects[row].Name
	byClass := map[string]timeline.Step{}
	var order []string
	for _, s := range steps {
		if _, ok := byClass[s.Class]; !ok {
			byClass[s.Class] = s
			order = append(order, s.Class)
		}
	}
	want := []string{timeline.ClassCreate, timeline.ClassSchedule, timeline.ClassStart}
	if len(order) < 3 || !slices.Equal(order[:3], want) {
		t.Errorf("pod %s: step classes %v, want %v first", name, order, want)
		return
	}
	if last := steps[len(steps)-1]; last.Type != events.Deleted {
		t.Errorf("pod %s: last step %s %s, want DELETED", name, last.Type, last.What)
	}
	actors := map[string]string{timeline.ClassCreate: apiserver.UserControllers,
		timeline.ClassSchedule: apiserver.UserScheduler, timeline.ClassStart: clustertest.Kubelet}
	for class, actor := range actors {
		if got := byClass[class].Actor; got != actor {
			t.Errorf("pod %s: %s by %q, want %q", name, class, got, actor)
		}
	}
	sched, start := byClass[timeline.ClassSchedule], byClass[timeline.ClassStart]
	if sched.CauseKind != "causation" || tl.Steps[sched.Cause].EventID != byClass[timeline.ClassCreate].EventID {
		t.Errorf("pod %s: binding caused by %+v, want the creation", name, sched)
	}
	if start.CauseKind != "causation" || tl.Steps[start.Cause].EventID != sched.EventID {
		t.Errorf("pod %s: start caused by step %d, want the binding", name, start.Cause)
	}
}

// checkPodTimeline: from a pod up to alice's write that started its chain.
func checkPodTimeline(t *testing.T, s *scenario) {
	dep := buildTimeline(t, s.c.Store, timeline.Options{Key: webKey})
	// The first pod created: its chain starts at alice's creation of the
	// deployment (later pods' chains start at her later writes).
	var pod timeline.Object
	for _, st := range dep.Steps {
		if o := dep.Objects[st.Object]; o.Kind == "Pod" {
			pod = o
			break
		}
	}
	tl := buildTimeline(t, s.c.Store, timeline.Options{Key: store.ObjKey{Resource: "pods", Namespace: "default", Name: pod.Name}, UID: pod.UID})
	if tl.Origin < 0 {
		t.Fatal("pod timeline has no origin")
	}
	o := tl.Steps[tl.Origin]
	if o.Actor != clustertest.Alice || tl.Objects[o.Object].Kind != "Deployment" || o.Class != timeline.ClassCreate {
		t.Errorf("origin %+v (%s), want alice's creation of the deployment", o, tl.Objects[o.Object].Kind)
	}
	kinds := map[string]bool{}
	for _, obj := range tl.Objects {
		kinds[obj.Kind] = true
	}
	if !kinds["ReplicaSet"] || !kinds["Deployment"] {
		t.Errorf("pod timeline rows %v, want its replicaset and deployment", kinds)
	}
}

func checkAudit(t *testing.T, s *scenario) {
	var logged []events.Revision
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	err := events.Tail(ctx, s.c.CP.JS, events.TailOptions{}, func(e *events.Event) error {
		if e.Actor.User == clustertest.Alice {
			logged = append(logged, e.Revision)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var res, updates *audit.Result
	err = s.c.Store.View(func(tx *store.Tx) (err error) {
		if res, err = audit.Run(tx, audit.Query{User: clustertest.Alice}); err != nil {
			return err
		}
		updates, err = audit.Run(tx, audit.Query{Verb: "update", Kind: "Deployment", Namespace: "default"})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var got []events.Revision
	for _, e := range res.Entries {
		got = append(got, e.Pos.Rev)
	}
	if !slices.Equal(got, logged) || len(got) != len(s.writes) {
		t.Fatalf("audit by alice: revisions %v; log has %v; alice made %d writes", got, logged, len(s.writes))
	}
	for i, w := range s.writes {
		if w.verb != "delete" && got[i] != w.rev {
			t.Errorf("write %d (%s) at %d, audit has %d", i, w.verb, w.rev, got[i])
		}
		if res.Entries[i].Verb != w.verb {
			t.Errorf("write %d: verb %q, want %q", i, res.Entries[i].Verb, w.verb)
		}
	}
	var aliceUpdates int
	for _, e := range updates.Entries {
		if e.User == clustertest.Alice {
			aliceUpdates++
		}
	}
	if aliceUpdates != 3 {
		t.Errorf("updates of deployments by alice: %d, want 3", aliceUpdates)
	}
}

// checkAt compares the state the projection gives at each snapshot's
// revision with what the apiserver served then.
func checkAt(t *testing.T, s *scenario) {
	for _, snap := range s.snaps {
		got := map[string]map[string]any{}
		err := s.c.Store.View(func(tx *store.Tx) error {
			for _, r := range resources {
				_, states, err := travel.List(tx, r.group, r.resource, "default", travel.Point{Rev: snap.rev})
				if err != nil {
					return err
				}
				for _, st := range states {
					got[r.resource+"/"+st.Key.Name] = decodeObject(t, st.Object)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		sameObjects(t, snap.step+" at "+snap.rev.String(), snap.objs, got)
	}
	err := s.c.Store.View(func(tx *store.Tx) error {
		d, err := travel.Diff(tx, webKey, travel.Point{Rev: s.writes[1].rev}, travel.Point{Rev: s.writes[2].rev})
		if err != nil {
			return err
		}
		for _, c := range d.Changes {
			if c.Path == "spec.template.spec.containers[0].image" && c.Old == `"busybox:1"` && c.New == `"busybox:2"` {
				return nil
			}
		}
		t.Errorf("diff scale..image: %v, want the image change", d.Changes)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// checkReplay rebuilds a data directory from the log up to the snapshot
// after the image change, starts a control plane on it (what `cairn up`
// runs) and compares every object, then verifies its log against etcd.
func checkReplay(t *testing.T, s *scenario) {
	snap := s.snaps[2]
	dir := filepath.Join(t.TempDir(), "replayed")
	rep, err := replay.Run(t.Context(), replay.Config{JS: s.c.CP.JS, DataDir: dir, ToRev: snap.rev})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("replay: %+v", rep)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cp, err := controlplane.Start(ctx, controlplane.Config{DataDir: dir, Listener: ln, NoFsync: true,
		Authenticator: apiserver.TokenAuthenticator{clustertest.AliceToken: {User: clustertest.Alice, Groups: []string{apiserver.GroupMasters}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Close()
	got := &scenario{c: &clustertest.Cluster{CP: cp, URL: "http://" + cp.Addr}}
	got.c.Alice = must(kubernetesFor(got.c.Config(clustertest.AliceToken)))(t)
	got.snapshot(t, "replayed")
	sameObjects(t, "replayed", snap.objs, got.snaps[0].objs)
	// The publisher resumes after the copied log; verify once it has
	// published whatever start-up wrote: nothing but the kubernetes
	// Service (its target port) and its Endpoints and EndpointSlice, which
	// now point at the new apiserver's address.
	const startupWrites = 3
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		r, err := publish.Verify(ctx, cp.Etcd, cp.JS)
		if err != nil {
			t.Fatal(err)
		}
		if r.OK() && r.Events+r.LeaseEvents == rep.Events+startupWrites {
			t.Logf("verify: %d events, history (%d, %d]", r.Events, r.CompactRevision, r.HeadRevision)
			return
		}
		if time.Now().After(deadline) {
			var b strings.Builder
			_ = r.Write(&b)
			t.Fatalf("verify of the replayed directory (%d events replayed):\n%s", rep.Events, firstLines(b.String(), 30))
		}
	}
}
