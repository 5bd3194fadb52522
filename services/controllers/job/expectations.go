package job

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// expectationsTimeout is how long expectations hold before a Job is acted
// on anyway (kube's ExpectationsTimeout).
const expectationsTimeout = 5 * time.Minute

// expectations are the pod creates and deletes a Job waits to see in the
// pod cache before it counts its active pods again (kube's
// ControllerExpectations). A record remembers the Job's UID, so the pods of
// an earlier Job of the same name do not lower the counts of a new one.
// Safe for concurrent use.
type expectations struct {
	now func() time.Time
	mu  sync.Mutex
	m   map[string]*expectation
}

type expectation struct {
	owner      types.UID
	adds, dels int
	at         time.Time
}

func newExpectations(now func() time.Time) *expectations {
	return &expectations{now: now, m: map[string]*expectation{}}
}

// satisfied reports whether key may be acted on: nothing is pending, or
// the record expired.
func (e *expectations) satisfied(key string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	x := e.m[key]
	return x == nil || x.adds <= 0 && x.dels <= 0 || e.now().Sub(x.at) >= expectationsTimeout
}

// expectCreations and expectDeletions set the record of key before the
// writes are made, so the events they cause cannot come first.
func (e *expectations) expectCreations(key string, owner types.UID, n int) { e.set(key, owner, n, 0) }
func (e *expectations) expectDeletions(key string, owner types.UID, n int) { e.set(key, owner, 0, n) }

func (e *expectations) set(key string, owner types.UID, adds, dels int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.m[key] = &expectation{owner: owner, adds: adds, dels: dels, at: e.now()}
}

func (e *expectations) creationObserved(key string, owner types.UID) { e.lower(key, owner, true) }
func (e *expectations) deletionObserved(key string, owner types.UID) { e.lower(key, owner, false) }

func (e *expectations) lower(key string, owner types.UID, add bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	x := e.m[key]
	if x == nil || x.owner != owner {
		return
	}
	if add {
		x.adds--
	} else {
		x.dels--
	}
}

func (e *expectations) forget(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.m, key)
}

// finalizerExpectations are the pods whose tracking finalizer this
// controller removed and whose update the cache has not shown yet (kube's
// uidTrackingExpectations): they are already counted.
type finalizerExpectations struct {
	mu sync.Mutex
	m  map[string]map[types.UID]struct{}
}

func newFinalizerExpectations() *finalizerExpectations {
	return &finalizerExpectations{m: map[string]map[types.UID]struct{}{}}
}

func (f *finalizerExpectations) expectRemoved(key string, uids []types.UID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.m[key]
	if s == nil {
		s = map[types.UID]struct{}{}
		f.m[key] = s
	}
	for _, u := range uids {
		s[u] = struct{}{}
	}
}

func (f *finalizerExpectations) removalObserved(key string, uid types.UID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s := f.m[key]; s != nil {
		delete(s, uid)
		if len(s) == 0 {
			delete(f.m, key)
		}
	}
}

// expected is a copy of the UIDs expected for key.
func (f *finalizerExpectations) expected(key string) map[types.UID]struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[types.UID]struct{}, len(f.m[key]))
	for u := range f.m[key] {
		out[u] = struct{}{}
	}
	return out
}

func (f *finalizerExpectations) forget(key string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.m, key)
}
