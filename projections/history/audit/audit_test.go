package audit_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/projections/history/audit"
	"github.com/cairn-dev/cairn/projections/history/historytest"
	"github.com/cairn-dev/cairn/projections/history/store"
)

// TestQuery runs each filter, alone and together, over a log whose
// revisions are known:
//
//	2-5    pod-0 in default: created (controller), bound (scheduler), started (kubelet), deleted by alice
//	6-9    pod-1 in default, the same, deleted by bob
//	10-13  pod-2 in other, the same, deleted by carol
//	14-18  Deployment web created by alice, its ReplicaSet, its pod web-rs-0 created, bound, started
//	19     web patched by dave
func TestQuery(t *testing.T) {
	g := historytest.NewGen()
	evs := append(g.PodLife("default", 0), g.PodLife("default", 1)...)
	evs = append(evs, g.PodLife("other", 2)...)
	evs = append(evs, g.Rollout("default", "web", "alice", 1)...)
	patch := g.Event(events.Modified, "apps", "deployments", "Deployment", "default", "web", "uid-dep-web", "dave", "", "", nil)
	patch.Verb = "patch"
	evs = append(evs, patch)
	st := historytest.Fill(t, evs)
	at := func(rev int) time.Time { return g.Start.Add(time.Duration(rev) * time.Millisecond) }
	span := func(from, to int) (revs []int) {
		for r := from; r <= to; r++ {
			revs = append(revs, r)
		}
		return revs
	}
	cases := []struct {
		name      string
		q         audit.Query
		want      []int // revisions
		scanned   int   // if set
		truncated bool
	}{
		{name: "everything", want: span(2, 19), scanned: 18},
		{name: "user", q: audit.Query{User: "alice"}, want: []int{5, 14}, scanned: 2},
		{name: "component", q: audit.Query{User: "system:kube-scheduler"}, want: []int{3, 7, 11, 17}},
		{name: "nobody", q: audit.Query{User: "mallory"}, scanned: 0},
		{name: "verb and its subresources", q: audit.Query{Verb: "create"}, want: []int{2, 3, 6, 7, 10, 11, 14, 15, 16, 17}},
		{name: "verb of a subresource", q: audit.Query{Verb: "update status"}, want: []int{4, 8, 12, 18}},
		{name: "verb", q: audit.Query{Verb: "patch"}, want: []int{19}},
		{name: "not a verb's prefix", q: audit.Query{Verb: "up"}},
		{name: "kind", q: audit.Query{Kind: "Pod"}, want: append(span(2, 13), 16, 17, 18)},
		{name: "resource", q: audit.Query{Kind: "pods"}, want: append(span(2, 13), 16, 17, 18)},
		{name: "kind in another case", q: audit.Query{Kind: "replicaset"}, want: []int{15}},
		{name: "resource.group", q: audit.Query{Kind: "deployments.apps"}, want: []int{14, 19}},
		{name: "group/resource", q: audit.Query{Kind: "apps/deployments"}, want: []int{14, 19}},
		{name: "namespace", q: audit.Query{Namespace: "other"}, want: span(10, 13)},
		{name: "name", q: audit.Query{Name: "web"}, want: []int{14, 19}},
		{name: "since and until", q: audit.Query{Since: at(10), Until: at(12)}, want: []int{10, 11, 12}},
		{name: "since", q: audit.Query{Since: at(17)}, want: []int{17, 18, 19}},
		{name: "until", q: audit.Query{Until: at(3)}, want: []int{2, 3}},
		{name: "since the end", q: audit.Query{Since: at(20)}},
		{name: "until before the start", q: audit.Query{Until: at(1)}},
		{name: "limit keeps the newest", q: audit.Query{Limit: 3}, want: []int{17, 18, 19}, truncated: true},
		{name: "limit above the count", q: audit.Query{User: "alice", Limit: 3}, want: []int{5, 14}},
		{name: "together", q: audit.Query{User: "system:kube-controller-manager", Namespace: "default", Kind: "pods"},
			want: []int{2, 6, 16}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var res *audit.Result
			if err := st.View(func(tx *store.Tx) (err error) {
				res, err = audit.Run(tx, tc.q)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			var got []int
			for i, s := range res.Entries {
				got = append(got, int(s.Pos.Rev))
				if i > 0 && !res.Entries[i-1].Pos.Less(s.Pos) {
					t.Errorf("entries out of order at %v", s.Pos)
				}
			}
			if !slices.Equal(got, tc.want) || res.Truncated != tc.truncated {
				t.Errorf("revisions %v (truncated %v), want %v (%v)", got, res.Truncated, tc.want, tc.truncated)
			}
			if tc.scanned != 0 || tc.q.User != "" && tc.want == nil {
				if res.Scanned != tc.scanned {
					t.Errorf("scanned %d, want %d", res.Scanned, tc.scanned)
				}
			}
		})
	}
}

func TestWriteText(t *testing.T) {
	g := historytest.NewGen()
	st := historytest.Fill(t, g.PodLife("default", 0))
	var res *audit.Result
	if err := st.View(func(tx *store.Tx) (err error) {
		res, err = audit.Run(tx, audit.Query{User: "alice"})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := res.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	want := "2025-01-01T00:00:00.005Z 5        alice                            delete         Pod default/pod-0\n"
	if b.String() != want {
		t.Errorf("got\n%q\nwant\n%q", b.String(), want)
	}
}
