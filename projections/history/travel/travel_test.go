package travel_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/projections/history/historytest"
	"github.com/cairn-dev/cairn/projections/history/store"
	"github.com/cairn-dev/cairn/projections/history/timeline"
	"github.com/cairn-dev/cairn/projections/history/travel"
)

// testLog: pod-0 (revisions 2-5: created, bound, running, deleted) and
// pod-1 (6-9) in default, pod-2 (10-13) in other, then a Deployment web
// with one pod web-rs-0 (14-18), one millisecond per revision.
func testLog() (*historytest.Gen, []*events.Event) {
	g := historytest.NewGen()
	evs := append(g.PodLife("default", 0), g.PodLife("default", 1)...)
	evs = append(evs, g.PodLife("other", 2)...)
	return g, append(evs, g.Rollout("default", "web", "alice", 1)...)
}

func TestParsePoint(t *testing.T) {
	cases := []struct {
		in      string
		want    travel.Point
		wantErr bool
	}{
		{in: "1234", want: travel.Point{Rev: 1234}},
		{in: "0", want: travel.Point{}},
		{in: "2025-01-01T00:00:00.005Z", want: travel.Point{Time: time.Date(2025, 1, 1, 0, 0, 0, 5e6, time.UTC)}},
		{in: "2025-01-01T02:00:00+02:00", want: travel.Point{Time: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}},
		{in: "", wantErr: true},
		{in: "-5", wantErr: true},
		{in: "12abc", wantErr: true},
		{in: "2025-01-01", wantErr: true},
		{in: "yesterday", wantErr: true},
	}
	for _, tc := range cases {
		p, err := travel.ParsePoint(tc.in)
		switch {
		case tc.wantErr && err == nil:
			t.Errorf("ParsePoint(%q) = %+v, want an error", tc.in, p)
		case !tc.wantErr && (err != nil || p.Rev != tc.want.Rev || !p.Time.Equal(tc.want.Time)):
			t.Errorf("ParsePoint(%q) = %+v, %v; want %+v", tc.in, p, err, tc.want)
		}
	}
}

func view(t *testing.T, st *store.Store, fn func(tx *store.Tx)) {
	t.Helper()
	if err := st.View(func(tx *store.Tx) error { fn(tx); return nil }); err != nil {
		t.Fatal(err)
	}
}

// TestGet reads pod-0 at every point of its life, by revision and by time.
func TestGet(t *testing.T) {
	g, evs := testLog()
	st := historytest.Fill(t, evs)
	at := func(rev events.Revision, extra time.Duration) travel.Point {
		return travel.Point{Time: g.Start.Add(time.Duration(rev)*time.Millisecond + extra)}
	}
	pod0 := store.ObjKey{Resource: "pods", Namespace: "default", Name: "pod-0"}
	web0 := store.ObjKey{Resource: "pods", Namespace: "default", Name: "web-rs-0"}
	cases := []struct {
		name  string
		key   store.ObjKey
		at    travel.Point
		want  events.Revision // 0: not found
		phase string
	}{
		{name: "before it was created", key: pod0, at: travel.Point{Rev: 1}},
		{name: "created", key: pod0, at: travel.Point{Rev: 2}, want: 2},
		{name: "bound", key: pod0, at: travel.Point{Rev: 3}, want: 3},
		{name: "running", key: pod0, at: travel.Point{Rev: 4}, want: 4, phase: "Running"},
		{name: "deleted", key: pod0, at: travel.Point{Rev: 5}},
		{name: "at the time of a revision", key: pod0, at: at(3, 0), want: 3},
		{name: "between two revisions", key: pod0, at: at(3, 500*time.Microsecond), want: 3},
		{name: "before the log", key: pod0, at: at(0, -time.Hour)},
		{name: "at the head, deleted", key: pod0, at: travel.Point{}},
		{name: "at the head", key: web0, at: travel.Point{}, want: 18, phase: "Running"},
	}
	view(t, st, func(tx *store.Tx) {
		for _, tc := range cases {
			s, err := travel.Get(tx, tc.key, tc.at)
			if tc.want == 0 {
				if !errors.Is(err, travel.ErrNotFound) {
					t.Errorf("%s: %+v, %v; want ErrNotFound", tc.name, s, err)
				}
				continue
			}
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
				continue
			}
			var obj struct {
				Metadata struct{ ResourceVersion string }
				Status   struct{ Phase string }
			}
			if err := json.Unmarshal(s.Object, &obj); err != nil {
				t.Fatal(err)
			}
			if s.Revision != tc.want || s.Key != tc.key || obj.Metadata.ResourceVersion != tc.want.String() || obj.Status.Phase != tc.phase {
				t.Errorf("%s: revision %d, key %v, object %s; want revision %d, phase %q", tc.name, s.Revision, s.Key, s.Object, tc.want, tc.phase)
			}
		}
	})
}

// TestList lists a kind at points of the log.
func TestList(t *testing.T) {
	g, evs := testLog()
	st := historytest.Fill(t, evs)
	cases := []struct {
		name                string
		group, resource, ns string
		at                  travel.Point
		wantRev             events.Revision
		want                []string // namespace/name@revision
	}{
		{name: "pods of default at 7", resource: "pods", ns: "default", at: travel.Point{Rev: 7}, wantRev: 7,
			want: []string{"default/pod-1@7"}},
		{name: "pods of every namespace at 11", resource: "pods", at: travel.Point{Rev: 11}, wantRev: 11,
			want: []string{"other/pod-2@11"}},
		{name: "pods at the time of 4", resource: "pods", at: travel.Point{Time: g.Start.Add(4 * time.Millisecond)}, wantRev: 4,
			want: []string{"default/pod-0@4"}},
		{name: "pods at the head", resource: "pods", wantRev: 18, want: []string{"default/web-rs-0@18"}},
		{name: "deployments at the head", group: "apps", resource: "deployments", wantRev: 18, want: []string{"default/web@14"}},
		{name: "replicasets of another namespace", group: "apps", resource: "replicasets", ns: "other", wantRev: 18},
		{name: "pods before the log", resource: "pods", at: travel.Point{Rev: 1}, wantRev: 1},
	}
	view(t, st, func(tx *store.Tx) {
		for _, tc := range cases {
			rev, items, err := travel.List(tx, tc.group, tc.resource, tc.ns, tc.at)
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			var got []string
			for _, s := range items {
				got = append(got, s.Key.Namespace+"/"+s.Key.Name+"@"+s.Revision.String())
			}
			if rev != tc.wantRev || len(got) != len(tc.want) || (len(got) > 0 && got[0] != tc.want[0]) {
				t.Errorf("%s: %v at %d, want %v at %d", tc.name, got, rev, tc.want, tc.wantRev)
			}
		}
	})
}

// TestDiff compares pod-0 between points of its life.
func TestDiff(t *testing.T) {
	_, evs := testLog()
	st := historytest.Fill(t, evs)
	pod0 := store.ObjKey{Resource: "pods", Namespace: "default", Name: "pod-0"}
	rev := func(r events.Revision) travel.Point { return travel.Point{Rev: r} }
	cases := []struct {
		name           string
		from, to       travel.Point
		fromRev, toRev events.Revision
		change         string // one of the changes
		notFound       bool
	}{
		{name: "created to running", from: rev(2), to: rev(4), fromRev: 2, toRev: 4, change: `status.phase: +"Running"`},
		{name: "before it existed", from: rev(1), to: rev(3), toRev: 3, change: `spec.nodeName: +"node-1"`},
		{name: "to after its delete", from: rev(3), to: rev(5), fromRev: 3, change: `spec.nodeName: -"node-1"`},
		{name: "never there", from: rev(5), to: rev(9), notFound: true},
	}
	view(t, st, func(tx *store.Tx) {
		for _, tc := range cases {
			d, err := travel.Diff(tx, pod0, tc.from, tc.to)
			if tc.notFound {
				if !errors.Is(err, travel.ErrNotFound) {
					t.Errorf("%s: %+v, %v; want ErrNotFound", tc.name, d, err)
				}
				continue
			}
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			if d.From != tc.from.Rev || d.To != tc.to.Rev || d.FromRev != tc.fromRev || d.ToRev != tc.toRev || !has(d.Changes, tc.change) {
				t.Errorf("%s: %+v, want object revisions %d→%d with %q", tc.name, d, tc.fromRev, tc.toRev, tc.change)
			}
		}
	})
}

func has(cs []timeline.Change, want string) bool {
	for _, c := range cs {
		if c.String() == want {
			return true
		}
	}
	return false
}
