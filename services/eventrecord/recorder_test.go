package eventrecord_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/events/consumer"
	"github.com/cairn-dev/cairn/services/apiserver"
	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
	"github.com/cairn-dev/cairn/services/eventrecord"
)

func TestRecorder(t *testing.T) {
	env := controlplanetest.Start(t)
	client, err := eventrecord.NewClient(env.ConfigFor(controlplanetest.ControllerToken), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	r := eventrecord.New(client, eventrecord.Config{Component: "test-controller", Instance: "replica-1"})
	controlplanetest.Run(t, r)
	ctx := context.Background()
	pod := controlplanetest.CreatePod(t, env, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}})
	podRef := eventrecord.Ref(pod, corev1.SchemeGroupVersion.WithKind("Pod"))

	t.Run("fields", func(t *testing.T) {
		r.Event(ctx, podRef, corev1.EventTypeNormal, "Tested", "Testing", "first")
		ev := controlplanetest.WaitForEvent(t, env, "default", "p", "Tested")
		if ev.Message != "first" || ev.Type != corev1.EventTypeNormal || ev.Count != 1 || ev.Action != "Testing" ||
			ev.Source != (corev1.EventSource{Component: "test-controller", Host: "replica-1"}) ||
			ev.ReportingController != "test-controller" || ev.ReportingInstance != "replica-1" ||
			ev.InvolvedObject.Kind != "Pod" || ev.InvolvedObject.APIVersion != "v1" || ev.InvolvedObject.UID != pod.UID ||
			ev.FirstTimestamp.IsZero() || ev.LastTimestamp.IsZero() || ev.EventTime.IsZero() {
			t.Errorf("event: %+v", ev)
		}
	})

	t.Run("repeat bumps the count", func(t *testing.T) {
		for range 3 {
			r.Event(ctx, podRef, corev1.EventTypeWarning, "Repeated", "", "the same message")
		}
		controlplanetest.Eventually(t, 10*time.Second, "one Repeated event with count 3", func() bool {
			evs := controlplanetest.ListEvents(t, env, "default", "p", "Repeated")
			return len(evs) == 1 && evs[0].Count == 3
		})
	})

	t.Run("similar events are combined", func(t *testing.T) {
		// Fifteen events that differ only in their message: nine are
		// written as they are, the tenth and later ones are combined into
		// one, whose count and message follow the latest.
		for i := range 15 {
			r.Eventf(ctx, podRef, corev1.EventTypeNormal, "Similar", "", "message %d", i)
		}
		controlplanetest.Eventually(t, 10*time.Second, "nine Similar events and one combining six", func() bool {
			evs := controlplanetest.ListEvents(t, env, "default", "p", "Similar")
			combined := 0
			for _, ev := range evs {
				if ev.Count == 6 && ev.Message == "(combined from similar events): message 14" {
					combined++
				}
			}
			return len(evs) == 10 && combined == 1
		})
	})

	t.Run("a burst passes 25 events per object", func(t *testing.T) {
		burst := corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: "default", Name: "burst", UID: "burst-uid"}
		for i := range 40 {
			r.Eventf(ctx, burst, corev1.EventTypeNormal, "Burst", "", "message %d", i)
		}
		// Nine on their own, then one combining the next sixteen; the
		// last fifteen are dropped.
		var evs []corev1.Event
		controlplanetest.Eventually(t, 10*time.Second, "25 Burst events written", func() bool {
			evs = controlplanetest.ListEvents(t, env, "default", "burst", "Burst")
			n := int32(0)
			for _, ev := range evs {
				n += ev.Count
			}
			return n >= 25
		})
		time.Sleep(time.Second) // anything more would be written by now
		evs = controlplanetest.ListEvents(t, env, "default", "burst", "Burst")
		n := int32(0)
		for _, ev := range evs {
			n += ev.Count
		}
		if len(evs) != 10 || n != 25 {
			t.Errorf("%d Burst events with counts summing to %d, want 10 summing to 25", len(evs), n)
		}
	})

	t.Run("cluster-scoped objects' events live in default", func(t *testing.T) {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "node-uid"}}
		r.Event(ctx, eventrecord.Ref(node, corev1.SchemeGroupVersion.WithKind("Node")), corev1.EventTypeNormal, "NodeTested", "", "hello")
		ev := controlplanetest.WaitForEvent(t, env, metav1.NamespaceDefault, "n1", "NodeTested")
		if ev.InvolvedObject.Namespace != "" || ev.InvolvedObject.Kind != "Node" {
			t.Errorf("node event refers to %+v", ev.InvolvedObject)
		}
	})

	t.Run("the write carries the cause", func(t *testing.T) {
		cause := consumer.Cause{EventID: "01JCAUSE00000000000000000", CorrelationID: "01JROOT000000000000000000"}
		cctx, cancel := context.WithCancel(consumer.WithCause(ctx, cause))
		r.Event(cctx, podRef, corev1.EventTypeNormal, "Caused", "", "because")
		// The recorder writes later: a cancelled recording context
		// must not stop it.
		cancel()
		ev := controlplanetest.WaitForEvent(t, env, "default", "p", "Caused")
		var logged *events.Event
		if err := events.Tail(ctx, env.JS, events.TailOptions{Resource: "events", Namespace: "default", Name: ev.Name}, func(e *events.Event) error {
			logged = e
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if logged == nil || logged.CausationID != cause.EventID || logged.CorrelationID != cause.CorrelationID || logged.Actor.User != apiserver.UserControllers {
			t.Errorf("event's create on the log: %+v; want causation %q, correlation %q, actor %q", logged, cause.EventID, cause.CorrelationID, apiserver.UserControllers)
		}
	})

	if r.Dropped() != 0 || r.Written() == 0 {
		t.Errorf("written %d, dropped %d", r.Written(), r.Dropped())
	}
}

// A full queue drops new events instead of blocking the caller.
func TestRecorderQueueFull(t *testing.T) {
	env := controlplanetest.Start(t)
	client, err := eventrecord.NewClient(env.ConfigFor(controlplanetest.ControllerToken), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Not running: nothing leaves the queue.
	r := eventrecord.New(client, eventrecord.Config{Component: "test"})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 40000 {
			// Distinct objects, so that the correlator's spam filter
			// lets each through.
			ref := corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: "default", Name: fmt.Sprintf("p%d", i)}
			r.Event(context.Background(), ref, corev1.EventTypeNormal, "Queued", "", "m")
		}
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("recording blocked on a full queue")
	}
	if r.Dropped() == 0 {
		t.Errorf("no event dropped with 40,000 queued and none written")
	}
}
