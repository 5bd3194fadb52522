package kubelet

import (
	"sync"
	"time"
)

// backoff is per-key exponential back-off, with the semantics of client-go's
// flowcontrol.Backoff as the kubelet uses it for crash loops and image
// pulls: the first failure is retried at once and starts the back-off at
// initial; every later failure doubles it up to max; an entry not updated for
// 2*max is forgotten (the back-off resets).
type backoff struct {
	initial, max time.Duration
	now          func() time.Time

	mu      sync.Mutex
	entries map[string]*backoffEntry
}

type backoffEntry struct {
	delay      time.Duration
	lastUpdate time.Time
}

func newBackoff(initial, max time.Duration, now func() time.Time) *backoff {
	return &backoff{initial: initial, max: max, now: now, entries: map[string]*backoffEntry{}}
}

func (b *backoff) expired(e *backoffEntry, at time.Time) bool {
	return at.Sub(e.lastUpdate) > 2*b.max
}

// inBackOffSince reports whether key is still backing off from a failure
// at since, and when the back-off ends.
func (b *backoff) inBackOffSince(key string, since time.Time) (bool, time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.entries[key]
	if !ok || b.expired(e, since) {
		return false, time.Time{}
	}
	end := since.Add(e.delay)
	return b.now().Before(end), end
}

// inBackOffSinceUpdate reports whether key backs off from its last next
// call (image pulls), and when that ends.
func (b *backoff) inBackOffSinceUpdate(key string) (bool, time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.entries[key]
	if !ok {
		return false, time.Time{}
	}
	end := e.lastUpdate.Add(e.delay)
	return b.now().Before(end), end
}

// next records a failure at since: a new entry starts at initial, an
// existing one doubles.
func (b *backoff) next(key string, since time.Time) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.entries[key]
	if !ok || b.expired(e, since) {
		e = &backoffEntry{delay: b.initial}
		b.entries[key] = e
	} else {
		e.delay = min(2*e.delay, b.max)
	}
	e.lastUpdate = b.now()
	return e.delay
}

// delay is key's current back-off (0 if none).
func (b *backoff) delay(key string) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	if e, ok := b.entries[key]; ok {
		return e.delay
	}
	return 0
}

// forgetPrefix drops every key with that prefix (a pod's containers).
func (b *backoff) forgetPrefix(prefix string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for k := range b.entries {
		if len(k) >= len(prefix) && k[:len(prefix)] == prefix {
			delete(b.entries, k)
		}
	}
}
