package endpoint

import (
	"sync"
	"time"
)

// unwrittenTriggers holds, per Service key, the trigger time of changes
// that kube's TriggerTimeTracker has handed out but no write has carried
// yet (the sync failed or met a stale cache): the tracker reports each
// change once, and the retry must still carry it. The Endpoints and the
// EndpointSlice controllers each keep one.
type unwrittenTriggers struct {
	mu sync.Mutex
	m  map[string]time.Time
}

func newUnwrittenTriggers() *unwrittenTriggers {
	return &unwrittenTriggers{m: map[string]time.Time{}}
}

// triggerTime is the earlier of computed and the trigger time a failed
// sync of key left unwritten.
func (u *unwrittenTriggers) triggerTime(key string, computed time.Time) time.Time {
	u.mu.Lock()
	defer u.mu.Unlock()
	if t, ok := u.m[key]; ok && (computed.IsZero() || t.Before(computed)) {
		return t
	}
	return computed
}

// settle forgets key's unwritten trigger time once a sync wrote (or found
// nothing to write), and keeps trigger for the retry otherwise.
func (u *unwrittenTriggers) settle(key string, trigger time.Time, written bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if written || trigger.IsZero() {
		delete(u.m, key)
		return
	}
	u.m[key] = trigger
}

// forget drops key, whose Service is gone.
func (u *unwrittenTriggers) forget(key string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	delete(u.m, key)
}
