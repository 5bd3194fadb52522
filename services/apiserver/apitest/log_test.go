package apitest

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/services/apiserver"
	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
)

// TestLogEvents checks that the log holds exactly one event per committed
// write, in order, with the actor and the causation and correlation ids of
// the request, and none for refused or no-op writes.
func TestLogEvents(t *testing.T) {
	env := controlplanetest.Start(t)
	ids := func(cause, corr string) http.Header {
		h := http.Header{}
		if cause != "" {
			h.Set(events.HeaderCausationID, cause)
		}
		if corr != "" {
			h.Set(events.HeaderCorrelationID, corr)
		}
		return h
	}
	pod := testPod("logged")
	running := testPod("logged")
	running.Status.Phase = corev1.PodRunning

	type want struct {
		typ   events.Type
		verb  string
		actor string
		cause string
		// corr is the correlation id; "" means the event's own id.
		corr string
	}
	steps := []struct {
		name string
		c    call
		// want is nil for a write that must not make an event.
		want *want
	}{
		{"create", call{method: "POST", path: podsPath, body: mustJSON(t, pod), header: ids("cause-1", "corr-1")},
			&want{events.Added, "create", "admin", "cause-1", "corr-1"}},
		{"update", call{method: "PUT", path: podsPath + "/logged", body: mustJSON(t, labeledPod("logged", map[string]string{"app": "web", "v": "2"})), header: ids("cause-2", "")},
			&want{events.Modified, "update", "admin", "cause-2", ""}},
		{"no-op update", call{method: "PUT", path: podsPath + "/logged", body: mustJSON(t, labeledPod("logged", map[string]string{"app": "web", "v": "2"})), header: ids("cause-x", "corr-x")},
			nil},
		{"refused update", call{method: "PUT", path: podsPath + "/logged", body: []byte(`{"metadata":{"name":"logged"},"spec":{"containers":[]}}`), header: ids("cause-x", "corr-x")},
			nil},
		{"patch", call{method: "PATCH", path: podsPath + "/logged", contentType: "application/merge-patch+json", body: []byte(`{"metadata":{"labels":{"v":"3"}}}`), header: ids("cause-3", "corr-1")},
			&want{events.Modified, "patch", "admin", "cause-3", "corr-1"}},
		{"patch by the controller manager", call{method: "PATCH", path: podsPath + "/logged", contentType: "application/merge-patch+json", body: []byte(`{"metadata":{"labels":{"v":"4"}}}`),
			token: controlplanetest.ControllerToken, header: ids("cause-4", "corr-1")},
			&want{events.Modified, "patch", apiserver.UserControllers, "cause-4", "corr-1"}},
		{"binding", call{method: "POST", path: podsPath + "/logged/binding", body: []byte(`{"apiVersion":"v1","kind":"Binding","metadata":{"name":"logged"},"target":{"kind":"Node","name":"n1"}}`),
			token: controlplanetest.SchedulerToken, header: ids("cause-5", "corr-1")},
			&want{events.Modified, "create binding", apiserver.UserScheduler, "cause-5", "corr-1"}},
		{"status", call{method: "PUT", path: podsPath + "/logged/status", body: mustJSON(t, running), header: ids("cause-6", "corr-1")},
			&want{events.Modified, "update status", "admin", "cause-6", "corr-1"}},
		{"delete", call{method: "DELETE", path: podsPath + "/logged?gracePeriodSeconds=0", header: ids("cause-7", "corr-1")},
			&want{events.Deleted, "delete", "admin", "cause-7", "corr-1"}},
	}

	before := settle(t, env)
	type made struct {
		name string
		want *want
		id   string
		rv   string
	}
	var writes []made
	for _, s := range steps {
		r := do(t, env, s.c)
		if s.want == nil {
			if r.code < 300 {
				var m metav1.PartialObjectMetadata
				_ = json.Unmarshal(r.body, &m)
				if last := writes[len(writes)-1]; m.ResourceVersion != last.rv {
					t.Errorf("%s: resourceVersion %s, want %s unchanged", s.name, m.ResourceVersion, last.rv)
				}
			}
			continue
		}
		if r.code >= 300 {
			t.Fatalf("%s: %d %s", s.name, r.code, truncate(r.body))
		}
		id := r.header.Get(events.HeaderEventID)
		if id == "" {
			t.Errorf("%s: no %s header", s.name, events.HeaderEventID)
		}
		var m metav1.PartialObjectMetadata
		if err := json.Unmarshal(r.body, &m); err != nil {
			t.Fatal(err)
		}
		rv := m.ResourceVersion
		if s.name == "binding" {
			// The binding answers a Status; read the pod.
			g := do(t, env, call{method: "GET", path: podsPath + "/logged"})
			if err := json.Unmarshal(g.body, &m); err != nil {
				t.Fatal(err)
			}
			rv = m.ResourceVersion
		}
		writes = append(writes, made{s.name, s.want, id, rv})
	}

	got := eventsSince(t, env, before)
	if len(got) != len(writes) {
		for _, ev := range got {
			t.Logf("event %d %s %s by %s", ev.Revision, ev.Type, ev.Verb, ev.Actor.User)
		}
		t.Fatalf("log has %d events, want one per write: %d", len(got), len(writes))
	}
	for i, w := range writes {
		ev := got[i]
		t.Run(w.name, func(t *testing.T) {
			if ev.ID != w.id {
				t.Errorf("event id %q, response header %q", ev.ID, w.id)
			}
			if strconv.FormatInt(int64(ev.Revision), 10) != w.rv {
				t.Errorf("revision %d, resourceVersion %s", ev.Revision, w.rv)
			}
			if ev.Type != w.want.typ || ev.Verb != w.want.verb {
				t.Errorf("%s %q, want %s %q", ev.Type, ev.Verb, w.want.typ, w.want.verb)
			}
			if ev.Actor.User != w.want.actor {
				t.Errorf("actor %q, want %q", ev.Actor.User, w.want.actor)
			}
			if w.want.actor == "admin" && !slices.Contains(ev.Actor.Groups, apiserver.GroupMasters) {
				t.Errorf("actor groups %v", ev.Actor.Groups)
			}
			corr := w.want.corr
			if corr == "" {
				corr = ev.ID
			}
			if ev.CausationID != w.want.cause || ev.CorrelationID != corr {
				t.Errorf("causation %q correlation %q, want %q %q", ev.CausationID, ev.CorrelationID, w.want.cause, corr)
			}
			if ev.AuditID == "" || ev.Time.IsZero() {
				t.Errorf("audit id %q, time %v", ev.AuditID, ev.Time)
			}
			if ev.Group != "" || ev.Version != "v1" || ev.Resource != "pods" || ev.Kind != "Pod" || ev.Namespace != "default" || ev.Name != "logged" || ev.UID == "" {
				t.Errorf("envelope %s/%s %s %s %s/%s uid %q", ev.Group, ev.Version, ev.Resource, ev.Kind, ev.Namespace, ev.Name, ev.UID)
			}
			var obj corev1.Pod
			if err := json.Unmarshal(ev.Object, &obj); err != nil {
				t.Fatal(err)
			}
			if obj.ResourceVersion != w.rv || obj.Name != "logged" {
				t.Errorf("object %s at %q, want resourceVersion %s", obj.Name, obj.ResourceVersion, w.rv)
			}
			if w.want.verb == "create binding" && (ev.NodeName != "n1" || obj.Spec.NodeName != "n1") {
				t.Errorf("binding event nodeName %q, object %q", ev.NodeName, obj.Spec.NodeName)
			}
		})
	}
}

// TestLogPartitions: a pod's events carry its controller's partition, and
// the updates that adopt or release it (which change the controller) carry
// none, so that the consumers of the partition it leaves see it go.
func TestLogPartitions(t *testing.T) {
	env := controlplanetest.Start(t)
	ctx := ctxFor(t, 30*time.Second)
	pods := env.Client.CoreV1().Pods("default")
	mark := settle(t, env)
	p, err := pods.Create(ctx, labeledPod("adoptee", map[string]string{"app": "a"}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ref := `{"metadata":{"ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"rs-a","uid":"u-a","controller":true}]}}`
	steps := []struct {
		name, patch string
	}{
		{"adopt", ref},
		{"relabel", `{"metadata":{"labels":{"app":"b"}}}`},
		{"release", `{"metadata":{"ownerReferences":null}}`},
		{"adopt again", ref},
	}
	for _, s := range steps {
		if p, err = pods.Patch(ctx, p.Name, types.MergePatchType, []byte(s.patch), metav1.PatchOptions{}); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
	}
	if err := pods.Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	part := events.Partition("default", "rs-a")
	want := []string{"", "", part, "", "", part}
	var got []string
	for _, ev := range eventsSince(t, env, mark) {
		if ev.Resource == "pods" && ev.Name == "adoptee" {
			got = append(got, ev.Partition)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("partitions of create, adopt, relabel, release, adopt, delete: %q, want %q", got, want)
	}
}
