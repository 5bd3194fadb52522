package controlplanetest

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
)

// Eventually polls cond every 50 ms until it holds, or fails the test
// after d.
func Eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ListEvents lists the core/v1 Events in ns about the object named name
// with the given reason, through the apiserver's field selectors (as
// kubectl describe finds them).
func ListEvents(t testing.TB, env *Env, ns, name, reason string) []corev1.Event {
	t.Helper()
	sel := fields.Set{"involvedObject.name": name, "reason": reason}.AsSelector().String()
	l, err := env.Client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: sel})
	if err != nil {
		t.Fatalf("list events: %v", err)
	}
	return l.Items
}

// WaitForEvent waits up to 30 s for an Event with reason about the object
// named name in ns, and returns the first one listed.
func WaitForEvent(t testing.TB, env *Env, ns, name, reason string) *corev1.Event {
	t.Helper()
	var evs []corev1.Event
	Eventually(t, 30*time.Second, "a "+reason+" event about "+name, func() bool {
		evs = ListEvents(t, env, ns, name, reason)
		return len(evs) > 0
	})
	return &evs[0]
}
