package timeline_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/projections/history/historytest"
	"github.com/cairn-dev/cairn/projections/history/store"
	"github.com/cairn-dev/cairn/projections/history/timeline"
)

// testLog is a rollout of two pods followed by every other kind of change
// of the Deployment, one revision (and one millisecond) apart:
//
//	rev 2  deployment created (alice)      rev 10 pod 0 ready (kubelet, caused by rev 6)
//	rev 3  replicaset created              rev 11 scaled 2→3 (alice)
//	rev 4-6  pod 0 created, bound, running rev 12 status (controller, caused by rev 11)
//	rev 7-9  pod 1 created, bound, running rev 13 image busybox:1→busybox:2 (alice)
//	                                       rev 14 labels (alice)
//	                                       rev 15 terminating (bob), rev 16 deleted (bob)
//
// then pod-x created, deleted and created again under a new uid (revs
// 17-19).
type testLog struct {
	evs  []*events.Event
	byID map[string]*events.Event
}

func newTestLog() *testLog {
	g := historytest.NewGen()
	l := &testLog{evs: g.Rollout("default", "web", "alice", 2)}
	dep := func(typ events.Type, user, cause string, spec map[string]any, more map[string]any) {
		obj := map[string]any{"spec": spec}
		for k, v := range more {
			obj[k] = v
		}
		l.evs = append(l.evs, g.Event(typ, "apps", "deployments", "Deployment", "default", "web", "uid-dep-web", user, cause, "", obj))
	}
	start := l.evs[4]
	ready := g.Event(events.Modified, "", "pods", "Pod", "default", "web-rs-0", "uid-web-pod-0", "system:node:node-1", start.ID, start.CorrelationID,
		map[string]any{"metadata": map[string]any{"ownerReferences": []any{map[string]any{"uid": "uid-rs-web", "controller": true}}},
			"spec":   map[string]any{"nodeName": "node-1"},
			"status": map[string]any{"phase": "Running", "conditions": []any{map[string]any{"type": "Ready", "status": "True"}}}})
	l.evs = append(l.evs, ready)
	status := map[string]any{"status": map[string]any{"replicas": 2, "readyReplicas": 2, "updatedReplicas": 2}}
	dep(events.Modified, "alice", "", historytest.DeploymentSpec(3, "busybox:1"), nil)
	dep(events.Modified, "system:kube-controller-manager", l.evs[len(l.evs)-1].ID, historytest.DeploymentSpec(3, "busybox:1"), status)
	dep(events.Modified, "alice", "", historytest.DeploymentSpec(3, "busybox:2"), status)
	labels := map[string]any{"status": status["status"], "metadata": map[string]any{"labels": map[string]any{"team": "a"}}}
	dep(events.Modified, "alice", "", historytest.DeploymentSpec(3, "busybox:2"), labels)
	terminating := map[string]any{"status": status["status"], "metadata": map[string]any{"labels": map[string]any{"team": "a"},
		"deletionTimestamp": "2025-01-01T00:00:00Z"}}
	dep(events.Modified, "bob", "", historytest.DeploymentSpec(3, "busybox:2"), terminating)
	dep(events.Deleted, "bob", "", historytest.DeploymentSpec(3, "busybox:2"), terminating)
	l.evs = append(l.evs,
		g.Event(events.Added, "", "pods", "Pod", "default", "pod-x", "uid-x-1", "bob", "", "", nil),
		g.Event(events.Deleted, "", "pods", "Pod", "default", "pod-x", "uid-x-1", "bob", "", "", nil),
		g.Event(events.Added, "", "pods", "Pod", "default", "pod-x", "uid-x-2", "bob", "", "", nil))
	l.byID = map[string]*events.Event{}
	for _, e := range l.evs {
		l.byID[e.ID] = e
	}
	return l
}

var (
	webKey  = store.ObjKey{Group: "apps", Resource: "deployments", Namespace: "default", Name: "web"}
	pod0Key = store.ObjKey{Resource: "pods", Namespace: "default", Name: "web-rs-0"}
	podXKey = store.ObjKey{Resource: "pods", Namespace: "default", Name: "pod-x"}
)

func build(t *testing.T, st *store.Store, opts timeline.Options) *timeline.Timeline {
	t.Helper()
	var tl *timeline.Timeline
	if err := st.View(func(tx *store.Tx) (err error) {
		tl, err = timeline.Build(tx, opts)
		return err
	}); err != nil {
		t.Fatalf("timeline of %s: %v", opts.Key, err)
	}
	return tl
}

// stepAt is the step of the event at rev.
func stepAt(t *testing.T, tl *timeline.Timeline, rev events.Revision) (int, timeline.Step) {
	t.Helper()
	for i, s := range tl.Steps {
		if s.Pos.Rev == rev {
			return i, s
		}
	}
	t.Fatalf("no step at revision %d", rev)
	return -1, timeline.Step{}
}

// TestSteps checks each step of the Deployment's timeline: what it did,
// its diff, its cause and its latency.
func TestSteps(t *testing.T) {
	l := newTestLog()
	tl := build(t, historytest.Fill(t, l.evs), timeline.Options{Key: webKey})
	cases := []struct {
		rev       events.Revision
		class     string
		what      string
		diff      string // one of the step's changes, if set
		cause     events.Revision
		causeKind string
		sentence  string
	}{
		{rev: 2, class: timeline.ClassCreate, what: "created"},
		{rev: 3, class: timeline.ClassCreate, what: "created", cause: 2, causeKind: "causation",
			sentence: "created 1.0 ms after created of Deployment/web"},
		{rev: 5, class: timeline.ClassSchedule, what: "scheduled to node-1", diff: `spec.nodeName: +"node-1"`, cause: 4, causeKind: "causation",
			sentence: "scheduled to node-1 1.0 ms after created"},
		{rev: 6, class: timeline.ClassStart, what: "running", diff: `status.phase: +"Running"`, cause: 5, causeKind: "causation"},
		{rev: 7, class: timeline.ClassCreate, what: "created", cause: 3, causeKind: "causation"},
		{rev: 10, class: timeline.ClassReady, what: "ready", cause: 6, causeKind: "causation"},
		{rev: 11, class: timeline.ClassScale, what: "scaled 2→3", diff: "spec.replicas: 2→3", cause: 2, causeKind: "previous",
			sentence: "scaled 2→3 9.0 ms after created"},
		{rev: 12, class: timeline.ClassStatus, what: "status: 2 ready, 2 updated of 3", diff: "status.readyReplicas: +2", cause: 11, causeKind: "causation"},
		{rev: 13, class: timeline.ClassRollout, what: "image busybox:1→busybox:2",
			diff: `spec.template.spec.containers[0].image: "busybox:1"→"busybox:2"`, cause: 12, causeKind: "previous"},
		{rev: 14, class: timeline.ClassUpdate, what: "updated", diff: `metadata.labels.team: +"a"`, cause: 13, causeKind: "previous"},
		{rev: 15, class: timeline.ClassDelete, what: "terminating", cause: 14, causeKind: "previous"},
		{rev: 16, class: timeline.ClassDelete, what: "deleted", cause: 15, causeKind: "previous"},
	}
	for _, tc := range cases {
		t.Run(tc.what+" at "+tc.rev.String(), func(t *testing.T) {
			i, s := stepAt(t, tl, tc.rev)
			if s.Class != tc.class || s.What != tc.what {
				t.Errorf("class %q, what %q; want %q, %q", s.Class, s.What, tc.class, tc.what)
			}
			if tc.diff != "" && !hasChange(s.Diff, tc.diff) {
				t.Errorf("diff %v lacks %q", s.Diff, tc.diff)
			}
			if tc.cause == 0 {
				if s.Cause != -1 || s.LatencyMS != 0 {
					t.Errorf("cause %d, latency %v; want none", s.Cause, s.LatencyMS)
				}
				return
			}
			if s.Cause < 0 || tl.Steps[s.Cause].Pos.Rev != tc.cause || s.CauseKind != tc.causeKind {
				t.Fatalf("cause %d (%q), want the step at revision %d (%q)", s.Cause, s.CauseKind, tc.cause, tc.causeKind)
			}
			// The generator's events are one millisecond per revision apart.
			if want := float64(tc.rev - tc.cause); s.LatencyMS != want {
				t.Errorf("latency %v ms, want %v", s.LatencyMS, want)
			}
			if tc.sentence != "" && tl.Sentence(i) != tc.sentence {
				t.Errorf("sentence %q, want %q", tl.Sentence(i), tc.sentence)
			}
		})
	}
}

func hasChange(cs []timeline.Change, want string) bool {
	for _, c := range cs {
		if c.String() == want {
			return true
		}
	}
	return false
}

// TestChain checks the rows and the order of the timeline of the
// Deployment (down the chain) and of a pod (up the chain).
func TestChain(t *testing.T) {
	l := newTestLog()
	st := historytest.Fill(t, l.evs)
	type row struct {
		title, role string
		depth       int
		owner       string
	}
	cases := []struct {
		name   string
		opts   timeline.Options
		rows   []row
		revs   []events.Revision // the steps, in order
		origin events.Revision
	}{
		{
			name: "down from the deployment",
			opts: timeline.Options{Key: webKey},
			rows: []row{{"Deployment default/web", "root", 0, ""}, {"ReplicaSet default/web-rs", "descendant", 1, "uid-dep-web"},
				{"Pod default/web-rs-0", "descendant", 2, "uid-rs-web"}, {"Pod default/web-rs-1", "descendant", 2, "uid-rs-web"}},
			revs:   []events.Revision{2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
			origin: 2,
		},
		{
			name:   "down one level",
			opts:   timeline.Options{Key: webKey, MaxDepth: 1},
			rows:   []row{{"Deployment default/web", "root", 0, ""}, {"ReplicaSet default/web-rs", "descendant", 1, "uid-dep-web"}},
			revs:   []events.Revision{2, 3, 11, 12, 13, 14, 15, 16},
			origin: 2,
		},
		{
			name: "up from a pod to the user's write",
			opts: timeline.Options{Key: pod0Key},
			rows: []row{{"Pod default/web-rs-0", "root", 0, "uid-rs-web"}, {"ReplicaSet default/web-rs", "ancestor", -1, "uid-dep-web"},
				{"Deployment default/web", "ancestor", -2, ""}},
			revs:   []events.Revision{2, 3, 4, 5, 6, 10},
			origin: 2,
		},
		{name: "the latest of a name", opts: timeline.Options{Key: podXKey},
			rows: []row{{"Pod default/pod-x", "root", 0, ""}}, revs: []events.Revision{19}, origin: 19},
		{name: "an earlier uid of the name", opts: timeline.Options{Key: podXKey, UID: "uid-x-1"},
			rows: []row{{"Pod default/pod-x", "root", 0, ""}}, revs: []events.Revision{17, 18}, origin: 17},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tl := build(t, st, tc.opts)
			var rows []row
			for _, o := range tl.Objects {
				rows = append(rows, row{o.Title(), o.Role, o.Depth, o.Owner})
			}
			if !slices.Equal(rows, tc.rows) {
				t.Errorf("rows %v, want %v", rows, tc.rows)
			}
			var revs []events.Revision
			for i, s := range tl.Steps {
				revs = append(revs, s.Pos.Rev)
				if e := l.byID[s.EventID]; e == nil || e.Revision != s.Pos.Rev || tl.Objects[s.Object].UID != e.UID {
					t.Errorf("step %d (%s): not the event of its row", i, s.EventID)
				}
			}
			if !slices.Equal(revs, tc.revs) {
				t.Errorf("steps at %v, want %v", revs, tc.revs)
			}
			if tl.Origin < 0 || tl.Steps[tl.Origin].Pos.Rev != tc.origin {
				t.Errorf("origin %d, want the step at revision %d", tl.Origin, tc.origin)
			}
			if tl.Head != l.evs[len(l.evs)-1].Revision {
				t.Errorf("head %d, want %d", tl.Head, l.evs[len(l.evs)-1].Revision)
			}
		})
	}
}

// TestNotFound: an object or uid the store has never seen.
func TestNotFound(t *testing.T) {
	st := historytest.Fill(t, newTestLog().evs)
	for _, opts := range []timeline.Options{
		{Key: store.ObjKey{Resource: "pods", Namespace: "default", Name: "nope"}},
		{Key: podXKey, UID: "uid-nope"},
	} {
		err := st.View(func(tx *store.Tx) error {
			_, err := timeline.Build(tx, opts)
			return err
		})
		if !errors.Is(err, timeline.ErrNotFound) {
			t.Errorf("%+v: %v, want ErrNotFound", opts, err)
		}
	}
}

// TestWriteSteps prints the steps after a position, as --follow does.
func TestWriteSteps(t *testing.T) {
	tl := build(t, historytest.Fill(t, newTestLog().evs), timeline.Options{Key: pod0Key})
	var b strings.Builder
	last, err := tl.WriteSteps(&b, store.Pos{Rev: 5})
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if last != (store.Pos{Rev: 10}) || !strings.HasPrefix(lines[0], "6 ") || !strings.Contains(lines[0], "running 1.0 ms after scheduled to node-1") {
		t.Errorf("after 5: last %v, output\n%s", last, b.String())
	}
	b.Reset()
	if last, err = tl.WriteSteps(&b, last); err != nil || b.Len() != 0 || last != (store.Pos{Rev: 10}) {
		t.Errorf("after the last step: %v, %v, %q", last, err, b.String())
	}
	b.Reset()
	if _, err := tl.WriteSteps(&b, store.Pos{}); err != nil || !strings.Contains(b.String(), "*created") {
		t.Errorf("the origin is not marked:\n%s", b.String())
	}
}

// TestMutatedBy shows the admission webhooks that changed an object on its
// step.
func TestMutatedBy(t *testing.T) {
	l := newTestLog()
	for _, e := range l.evs {
		if e.Resource == "pods" && e.Name == "pod-x" && e.Type == events.Added {
			e.Admission = &events.Admission{MutatedBy: []string{"sidecar-injector.cairn.dev"}}
		}
	}
	tl := build(t, historytest.Fill(t, l.evs), timeline.Options{Key: podXKey})
	var b strings.Builder
	if _, err := tl.WriteSteps(&b, store.Pos{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "created, mutated by sidecar-injector.cairn.dev") {
		t.Errorf("no mutated by:\n%s", b.String())
	}
	if n := strings.Count(b.String(), "mutated by"); n != 1 {
		t.Errorf("%d steps say mutated by:\n%s", n, b.String())
	}
}
