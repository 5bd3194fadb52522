// Package writes remembers, per object key, the revision of a
// controller's last write to the object, until the controller's cache
// shows it.
//
// A controller's caches follow the log each on its own: a round can see
// the dependents of after its last write (pods whose finalizers it just
// removed, a Job it just created) with its own object from before it (the
// status that counts them, the status.active that lists it). Acting on
// that mix double-counts or creates twice; kube's controllers meet it as
// conflicts and duplicate work. A round that asks Seen first waits for
// its own write instead (the write's event queues the key again).
package writes

import (
	"sync"

	"github.com/cairn-dev/cairn/events"
)

// Tracker holds the last write per key. Safe for concurrent use; the zero
// value is not usable, use New.
type Tracker struct {
	mu sync.Mutex
	m  map[string]events.Revision
}

// New returns an empty Tracker.
func New() *Tracker { return &Tracker{m: map[string]events.Revision{}} }

// Wrote records a write to key that returned resourceVersion rv.
func (t *Tracker) Wrote(key, rv string) {
	r, err := events.ParseRevision(rv)
	if err != nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if r > t.m[key] {
		t.m[key] = r
	}
}

// Seen reports whether the cached object of key, at resourceVersion rv,
// is at least as new as the last write to it; once it is, the write is
// forgotten. An unparsable rv counts as seen.
func (t *Tracker) Seen(key, rv string) bool {
	r, err := events.ParseRevision(rv)
	if err != nil {
		return true
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if r >= t.m[key] {
		delete(t.m, key)
		return true
	}
	return false
}

// Forget drops key (its object is gone).
func (t *Tracker) Forget(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.m, key)
}
