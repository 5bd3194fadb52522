package events_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/events"
)

func TestParseSubject(t *testing.T) {
	evs := []events.Event{
		{Resource: "pods", NodeName: "node-1", Namespace: "default", Name: "web-0"},
		{Resource: "pods", Namespace: "default", Name: "web-1"},
		{Group: "apps", Resource: "deployments", Namespace: "prod", Name: "web"},
		{Resource: "nodes", Name: "node.example.com"},
		{Group: "coordination.k8s.io", Resource: "leases", Namespace: "kube-node-lease", Name: "node-1"},
		{Group: "example.dev", Resource: "widgets", NodeName: "n.1", Namespace: "a", Name: "x.y"},
		{Resource: "pods", Namespace: "default", Name: "web-2", Partition: events.Partition("default", "web-5d4f")},
	}
	for _, ev := range evs {
		got, ok := events.ParseSubject(ev.Subject())
		if !ok || got != ev.Key() {
			t.Errorf("ParseSubject(%q) = %+v, %v; want %+v", ev.Subject(), got, ok, ev.Key())
		}
	}
	// A subject from before the partition token.
	if got, ok := events.ParseSubject("cairn.ev.core.pods.n1.default.web-0"); !ok || got != (events.SubjectKey{Resource: "pods", NodeName: "n1", Namespace: "default", Name: "web-0"}) {
		t.Errorf("seven-token subject: %+v, %v", got, ok)
	}
	for _, bad := range []string{"", "cairn.ev", "cairn.ev.core.pods._.default", "cairn.ev.core.pods._.default.a.7.b", "other.ev.core.pods._.default.a._"} {
		if k, ok := events.ParseSubject(bad); ok {
			t.Errorf("ParseSubject(%q) = %+v, want not ok", bad, k)
		}
	}
}

// TestPartition: every object of one controller shares a partition token,
// objects without one have none, and PartitionFilter selects exactly one
// partition.
func TestPartition(t *testing.T) {
	p := events.Partition("default", "web-5d4f")
	if p == "" || p != events.Partition("default", "web-5d4f") {
		t.Fatalf("Partition = %q", p)
	}
	if got := events.Partition("default", ""); got != "" {
		t.Errorf("no controller: %q", got)
	}
	seen := map[string]bool{}
	for i := range 1000 {
		seen[events.Partition("ns", fmt.Sprint("rs-", i))] = true
	}
	if len(seen) != events.Partitions {
		t.Errorf("1000 controllers fall in %d partitions, want %d", len(seen), events.Partitions)
	}
	ev := events.Event{Resource: "pods", Namespace: "default", Name: "web-5d4f-x", Partition: p}
	if f := events.PartitionFilter("", "pods", "", "", "", p); !subjectMatches(f, ev.Subject()) {
		t.Errorf("%s does not match %s", f, ev.Subject())
	}
	if f := events.PartitionFilter("", "pods", "", "", "", events.Empty); subjectMatches(f, ev.Subject()) {
		t.Errorf("%s matches %s", f, ev.Subject())
	}
	ev.Partition = ""
	if f := events.Filter("", "pods", "", "default", ""); !subjectMatches(f, ev.Subject()) {
		t.Errorf("%s does not match %s", f, ev.Subject())
	}
}

// subjectMatches is NATS subject matching for filters made of literal
// tokens and "*".
func subjectMatches(filter, subject string) bool {
	f, s := strings.Split(filter, "."), strings.Split(subject, ".")
	if len(f) != len(s) {
		return false
	}
	for i := range f {
		if f[i] != "*" && f[i] != s[i] {
			return false
		}
	}
	return true
}
