package job

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/cairn-dev/cairn/events"
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

// writtenStatus is, per Job, the revision of this controller's last
// status write. The Job and pod caches follow the log separately: a round
// that saw the pods of after the write (finalizers removed) with the Job
// of before it (the pods not yet counted) would count too few and create
// pods again. A round waits until the Job cache holds its own write.
type writtenStatus struct {
	mu sync.Mutex
	m  map[string]events.Revision
}

func newWrittenStatus() *writtenStatus { return &writtenStatus{m: map[string]events.Revision{}} }

func (w *writtenStatus) set(key, rv string) {
	r, err := events.ParseRevision(rv)
	if err != nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.m[key] = r
}

// seen reports whether the cached Job (at revision rv) is at least as new
// as the last write to it; it forgets the write once it is.
func (w *writtenStatus) seen(key, rv string) bool {
	r, err := events.ParseRevision(rv)
	if err != nil {
		return true
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if r >= w.m[key] {
		delete(w.m, key)
		return true
	}
	return false
}

func (w *writtenStatus) forget(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.m, key)
}
