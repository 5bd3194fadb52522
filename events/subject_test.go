package events_test

import (
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
	}
	for _, ev := range evs {
		got, ok := events.ParseSubject(ev.Subject())
		if !ok || got != ev.Key() {
			t.Errorf("ParseSubject(%q) = %+v, %v; want %+v", ev.Subject(), got, ok, ev.Key())
		}
	}
	for _, bad := range []string{"", "cairn.ev", "cairn.ev.core.pods._.default", "cairn.ev.core.pods._.default.a.b", "other.ev.core.pods._.default.a"} {
		if k, ok := events.ParseSubject(bad); ok {
			t.Errorf("ParseSubject(%q) = %+v, want not ok", bad, k)
		}
	}
}
