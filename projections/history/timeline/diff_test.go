package timeline_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/projections/history/timeline"
)

func TestDiff(t *testing.T) {
	long := strings.Repeat("x", 100)
	cases := []struct {
		name      string
		prev, cur string
		limit     int
		want      []string
	}{
		{name: "created", cur: `{"spec":{"replicas":1}}`, want: []string{"spec.replicas: +1"}},
		{name: "deleted", prev: `{"spec":{"replicas":1}}`, want: []string{"spec.replicas: -1"}},
		{name: "changed", prev: `{"spec":{"replicas":1}}`, cur: `{"spec":{"replicas":2}}`, want: []string{"spec.replicas: 1→2"}},
		{name: "in an array", prev: `{"c":[{"image":"a"},{"image":"b"}]}`, cur: `{"c":[{"image":"a"},{"image":"c"}]}`,
			want: []string{`c[1].image: "b"→"c"`}},
		{name: "array grows", prev: `{"c":[]}`, cur: `{"c":[1]}`, want: []string{"c: -[]", "c[0]: +1"}},
		{name: "empty object filled", prev: `{"a":{}}`, cur: `{"a":{"b":true}}`, want: []string{"a: -{}", "a.b: +true"}},
		{name: "sorted by path", prev: `{"b":1,"a":1}`, cur: `{"b":2,"a":2}`, want: []string{"a: 1→2", "b: 1→2"}},
		{name: "resourceVersion and managedFields ignored",
			prev: `{"metadata":{"resourceVersion":"1","managedFields":[{"manager":"a"}]}}`,
			cur:  `{"metadata":{"resourceVersion":"2","managedFields":[{"manager":"b"}]}}`},
		{name: "limited", prev: `{"a":1,"b":1,"c":1}`, cur: `{"a":2,"b":2,"c":2}`, limit: 2,
			want: []string{"a: 1→2", "b: 1→2", "(1 more)"}},
		{name: "long values cut", cur: `{"a":"` + long + `"}`, want: []string{`a: +"` + strings.Repeat("x", 58) + "…"}},
		{name: "not JSON is empty", prev: `not json`, cur: `{"a":1}`, want: []string{"a: +1"}},
		{name: "same", prev: `{"a":[1,{"b":2}]}`, cur: `{"a":[1,{"b":2}]}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, c := range timeline.Diff([]byte(tc.prev), []byte(tc.cur), tc.limit) {
				got = append(got, c.String())
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestFormatLatency(t *testing.T) {
	cases := []struct {
		ms   float64
		want string
	}{
		{0.5, "0.5 ms"}, {9.94, "9.9 ms"}, {41, "41 ms"}, {999, "999 ms"}, {1200, "1.2 s"}, {59_940, "59.9 s"}, {185_000, "3m5s"},
	}
	for _, tc := range cases {
		if got := timeline.FormatLatency(tc.ms); got != tc.want {
			t.Errorf("FormatLatency(%v) = %q, want %q", tc.ms, got, tc.want)
		}
	}
}
