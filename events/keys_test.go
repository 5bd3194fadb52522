package events_test

import (
	"testing"
	"time"

	"github.com/cairn-dev/cairn/events"
)

func TestFormatLine(t *testing.T) {
	ts := time.Date(2025, 1, 2, 15, 4, 5, 123456789, time.UTC)
	for _, tc := range []struct {
		name string
		ev   events.Event
		want string
	}{
		{"namespaced", events.Event{Time: ts, Revision: 1234, Type: events.Added, Kind: "Pod", Namespace: "default", Name: "web-0", Actor: events.Actor{User: "alice"}},
			"2025-01-02T15:04:05.123Z 1234 ADDED Pod default/web-0 alice"},
		{"cluster-scoped, no actor", events.Event{Time: ts, Revision: 7, Type: events.Deleted, Kind: "Node", Name: "n1"},
			"2025-01-02T15:04:05.123Z 7 DELETED Node n1 -"},
		{"local time is printed in UTC", events.Event{Time: ts.In(time.FixedZone("x", 3600)), Revision: 8, Type: events.Modified, Kind: "Lease", Namespace: "l", Name: "n"},
			"2025-01-02T15:04:05.123Z 8 MODIFIED Lease l/n -"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := events.FormatLine(&tc.ev); got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestRegistryKey(t *testing.T) {
	for _, tc := range []struct {
		key                              string
		group, resource, namespace, name string
		ok                               bool
	}{
		{"/registry/core/pods/default/web-0", "", "pods", "default", "web-0", true},
		{"/registry/apps/deployments/ns/d", "apps", "deployments", "ns", "d", true},
		{"/registry/core/nodes/n1", "", "nodes", "", "n1", true},
		{"/registry/coordination.k8s.io/leases/kube-node-lease/n1", "coordination.k8s.io", "leases", "kube-node-lease", "n1", true},
		{"/registry/core/pods", "", "", "", "", false},
		{"/registry/core/pods/a/b/c", "", "", "", "", false},
		{"/registry/core/pods//b", "", "", "", "", false},
		{"/cairn/txmeta", "", "", "", "", false},
	} {
		t.Run(tc.key, func(t *testing.T) {
			g, r, ns, n, ok := events.ParseRegistryKey(tc.key)
			if ok != tc.ok || g != tc.group || r != tc.resource || ns != tc.namespace || n != tc.name {
				t.Fatalf("ParseRegistryKey = %q %q %q %q %v", g, r, ns, n, ok)
			}
			if ok {
				if back := events.RegistryKey(g, r, ns, n); back != tc.key {
					t.Errorf("RegistryKey = %q", back)
				}
			}
		})
	}
}
