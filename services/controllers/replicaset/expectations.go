package replicaset

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// ExpectationsTimeout is how long expectations hold before a ReplicaSet is
// acted on anyway (kube's ExpectationsTimeout).
const ExpectationsTimeout = 5 * time.Minute

// expectations are the creates and deletes each ReplicaSet waits to see in
// the pod cache (kube's UIDTrackingControllerExpectations). Records are
// keyed by the ReplicaSet's key and remember its UID, so the pods of an
// earlier ReplicaSet with the same name cannot lower the counts of a new
// one. Safe for concurrent use.
type expectations struct {
	now     func() time.Time
	timeout time.Duration

	mu sync.Mutex
	m  map[string]*expectation
}

// expectation is what one ReplicaSet waits for.
type expectation struct {
	owner types.UID
	adds  int
	dels  map[types.UID]struct{} // pods whose deletion is not seen yet
	at    time.Time
}

func newExpectations(now func() time.Time, timeout time.Duration) *expectations {
	return &expectations{now: now, timeout: timeout, m: map[string]*expectation{}}
}

// satisfied reports whether the ReplicaSet key may be acted on: nothing is
// expected, everything expected was seen, or the record expired. When not,
// wait is how long until the record expires.
func (e *expectations) satisfied(key string) (ok bool, wait time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	x := e.m[key]
	if x == nil || x.adds <= 0 && len(x.dels) == 0 {
		return true, 0
	}
	age := e.now().Sub(x.at)
	if age >= e.timeout {
		return true, 0
	}
	return false, e.timeout - age
}

// expect replaces the record of key: adds creates and the deletion of the
// pods dels are expected. It must be called before the writes are made, so
// the events they cause cannot come first.
func (e *expectations) expect(key string, owner types.UID, adds int, dels []types.UID) {
	x := &expectation{owner: owner, adds: adds, dels: make(map[types.UID]struct{}, len(dels)), at: e.now()}
	for _, u := range dels {
		x.dels[u] = struct{}{}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.m[key] = x
}

// creationObserved lowers the creates key expects by one, if the pod's
// controller is the ReplicaSet the record is for.
func (e *expectations) creationObserved(key string, owner types.UID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if x := e.m[key]; x != nil && x.owner == owner && x.adds > 0 {
		x.adds--
	}
}

// deletionObserved marks the deletion of pod as seen. Seeing it twice (a
// deletionTimestamp, then the DELETED event) lowers the record once.
func (e *expectations) deletionObserved(key string, owner, pod types.UID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if x := e.m[key]; x != nil && x.owner == owner {
		delete(x.dels, pod)
	}
}

// forget drops the record of a ReplicaSet that is gone.
func (e *expectations) forget(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.m, key)
}
