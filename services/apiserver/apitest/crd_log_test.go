package apitest

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
)

// TestCRDWatchResume: a watch of custom objects opened from a past
// resourceVersion replays, from the log, every change after it, in order
// and with the revisions the writes returned, and then follows new ones;
// from the last revision it sees only what comes after.
func TestCRDWatchResume(t *testing.T) {
	env := controlplanetest.Start(t)
	establish(t, env, kilnCRD(t))
	ctx := ctxFor(t, time.Minute)
	dc := dynamic.NewForConfigOrDie(env.Config).Resource(kilnGVR).Namespace("default")
	created, err := dc.Create(ctx, kiln("k1", map[string]any{"fuel": "gas"}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dc.Create(ctx, kiln("other", map[string]any{"fuel": "gas"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var rvs []string
	for _, p := range []string{`{"spec":{"maxTemperature":1300}}`, `{"spec":{"fuel":"wood"}}`} {
		u, err := dc.Patch(ctx, "k1", types.MergePatchType, []byte(p), metav1.PatchOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rvs = append(rvs, u.GetResourceVersion())
	}
	type seen struct{ typ, rv string }
	next := func(w watch.Interface) seen {
		t.Helper()
		select {
		case ev := <-w.ResultChan():
			if ev.Type == watch.Error {
				t.Fatalf("watch error: %v", ev.Object)
			}
			u := ev.Object.(*unstructured.Unstructured)
			if u.GetName() != "k1" || u.GetKind() != "Kiln" {
				t.Errorf("event for %s %s", u.GetKind(), u.GetName())
			}
			return seen{string(ev.Type), u.GetResourceVersion()}
		case <-ctx.Done():
			t.Fatal("no watch event")
		}
		return seen{}
	}
	opts := func(rv string) metav1.ListOptions {
		return metav1.ListOptions{ResourceVersion: rv, FieldSelector: "metadata.name=k1"}
	}
	w, err := dc.Watch(ctx, opts(created.GetResourceVersion()))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for _, want := range []seen{{"MODIFIED", rvs[0]}, {"MODIFIED", rvs[1]}} {
		if got := next(w); got != want {
			t.Errorf("replayed %v, want %v", got, want)
		}
	}
	w2, err := dc.Watch(ctx, opts(rvs[1]))
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Stop()
	if err := dc.Delete(ctx, "k1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	a, b := next(w), next(w2)
	if a.typ != "DELETED" || a != b {
		t.Errorf("after the delete: %v and %v, want the same DELETED", a, b)
	}
}

// TestCRDOnTheLog: a custom object's changes are events like a built-in
// kind's: group, version, resource and kind in the envelope, the group
// and resource in the subject, so that a consumer filtering on the
// subject gets them (and only them) from the server.
func TestCRDOnTheLog(t *testing.T) {
	env := controlplanetest.Start(t)
	establish(t, env, kilnCRD(t))
	ctx := ctxFor(t, time.Minute)
	dc := dynamic.NewForConfigOrDie(env.Config).Resource(kilnGVR).Namespace("default")
	m := settle(t, env)
	created, err := dc.Create(ctx, kiln("logged", map[string]any{"fuel": "gas"}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := dc.Delete(ctx, "logged", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	var got []events.Event
	for _, ev := range eventsSince(t, env, m) {
		if ev.Group == "pottery.example.com" {
			got = append(got, ev)
		}
	}
	var types []events.Type
	for _, ev := range got {
		types = append(types, ev.Type)
		if ev.Version != "v1" || ev.Resource != "kilns" || ev.Kind != "Kiln" || ev.Namespace != "default" || ev.Name != "logged" ||
			ev.UID != string(created.GetUID()) || ev.Actor.User != "admin" {
			t.Errorf("event = %+v", ev)
		}
		var obj map[string]any
		if err := json.Unmarshal(ev.Object, &obj); err != nil || obj["kind"] != "Kiln" || obj["apiVersion"] != "pottery.example.com/v1" {
			t.Errorf("event object %s: %v", ev.Object, err)
		}
	}
	if !slices.Equal(types, []events.Type{events.Added, events.Deleted}) {
		t.Fatalf("kiln events = %v", types)
	}
	if got[0].Revision.String() != created.GetResourceVersion() {
		t.Errorf("event revision %d, resourceVersion %s", got[0].Revision, created.GetResourceVersion())
	}
	s, err := env.JS.Stream(ctx, events.Stream)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := s.GetLastMsgForSubject(ctx, events.Filter("pottery.example.com", "kilns", "", "default", ""))
	if err != nil {
		t.Fatalf("last message on the kilns subject: %v", err)
	}
	var last events.Event
	if err := json.Unmarshal(msg.Data, &last); err != nil || last.Type != events.Deleted || last.Name != "logged" {
		t.Errorf("last kilns event = %+v %v (subject %s)", last, err, msg.Subject)
	}
	if msg.Subject != got[1].Subject() {
		t.Errorf("subject %s, want %s", msg.Subject, got[1].Subject())
	}
}
