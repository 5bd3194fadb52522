package endpoint

import (
	"testing"
	"time"
)

func TestUnwrittenTriggers(t *testing.T) {
	u := newUnwrittenTriggers()
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	if got := u.triggerTime("ns/web", t0); !got.Equal(t0) {
		t.Fatalf("nothing unwritten: got %v, want the computed %v", got, t0)
	}
	u.settle("ns/web", t0, false) // the write failed: t0 waits for the retry
	// The tracker hands out a change only once: the retry computes zero, or
	// a later change, and must still carry t0.
	if got := u.triggerTime("ns/web", time.Time{}); !got.Equal(t0) {
		t.Errorf("retry with nothing new: got %v, want %v", got, t0)
	}
	if got := u.triggerTime("ns/web", t0.Add(time.Second)); !got.Equal(t0) {
		t.Errorf("retry with a later change: got %v, want the earlier %v", got, t0)
	}
	if got := u.triggerTime("ns/other", time.Time{}); !got.IsZero() {
		t.Errorf("another Service: got %v, want none", got)
	}
	u.settle("ns/web", t0, true)
	if got := u.triggerTime("ns/web", time.Time{}); !got.IsZero() {
		t.Errorf("after the write: got %v, want none", got)
	}
	u.settle("ns/web", t0, false)
	u.forget("ns/web")
	if got := u.triggerTime("ns/web", time.Time{}); !got.IsZero() {
		t.Errorf("after the Service went: got %v, want none", got)
	}
}
