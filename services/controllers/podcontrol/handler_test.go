package podcontrol

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cairn-dev/cairn/events"
)

func TestPodEvents(t *testing.T) {
	kind := schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "DaemonSet"}
	owned := func(name, owner string, uid types.UID, rv string) *corev1.Pod {
		yes := true
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("pod-" + name), ResourceVersion: rv,
			Labels: map[string]string{"app": "x"}}}
		if owner != "" {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: owner, UID: uid, Controller: &yes}}
		}
		return p
	}
	other := owned("o", "rs", "rs-uid", "1")
	other.OwnerReferences[0].Kind = "ReplicaSet"
	deleting := owned("d", "ds", "ds-uid", "2")
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
	relabelled := owned("p", "", "", "2")
	relabelled.Labels = map[string]string{"app": "y"}
	tests := []struct {
		name     string
		run      func(h PodEvents)
		want     []string
		wantSeen bool // the expected create or delete was observed
	}{
		{"owned pod added", func(h PodEvents) { h.Handler().OnAdd(owned("p", "ds", "ds-uid", "1"), nil) }, []string{"ns/ds"}, true},
		{"another kind's pod", func(h PodEvents) { h.Handler().OnAdd(other, nil) }, nil, false},
		{"orphan added", func(h PodEvents) { h.Handler().OnAdd(owned("p", "", "", "1"), nil) }, []string{"ns/a", "ns/b"}, false},
		{"added terminating", func(h PodEvents) { h.Handler().OnAdd(deleting, nil) }, []string{"ns/ds"}, true},
		{"deleted", func(h PodEvents) { h.Handler().OnDelete(owned("d", "ds", "ds-uid", "1"), nil) }, []string{"ns/ds"}, true},
		{"same revision", func(h PodEvents) {
			h.Handler().OnUpdate(owned("p", "ds", "ds-uid", "1"), owned("p", "ds", "ds-uid", "1"), nil)
		}, nil, false},
		{"released", func(h PodEvents) {
			h.Handler().OnUpdate(owned("p", "ds", "ds-uid", "1"), owned("p", "", "", "2"), nil)
		}, []string{"ns/ds", "ns/a", "ns/b"}, false},
		{"orphan relabelled", func(h PodEvents) { h.Handler().OnUpdate(owned("p", "", "", "1"), relabelled, nil) }, []string{"ns/a", "ns/b"}, false},
		{"graceful delete", func(h PodEvents) { h.Handler().OnUpdate(owned("d", "ds", "ds-uid", "1"), deleting, nil) }, []string{"ns/ds"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := NewExpectations(time.Now, time.Minute)
			e.Expect("ns/ds", "ds-uid", 1, []types.UID{"pod-d"})
			var got []string
			h := PodEvents{Kind: kind, Expect: e,
				Enqueue:  func(key string, _ *events.Event) { got = append(got, key) },
				Adopters: func(*corev1.Pod) []string { return []string{"ns/a", "ns/b"} }}
			tt.run(h)
			if !slices.Equal(got, tt.want) {
				t.Errorf("queued %v, want %v", got, tt.want)
			}
			e.mu.Lock()
			x := e.m["ns/ds"]
			seen := x.adds == 0 || len(x.dels) == 0
			e.mu.Unlock()
			if seen != tt.wantSeen {
				t.Errorf("expectations lowered %v, want %v", seen, tt.wantSeen)
			}
		})
	}
}
