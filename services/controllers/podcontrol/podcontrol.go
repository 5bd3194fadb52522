// Package podcontrol holds what controllers that create and delete pods
// share (kube's pkg/controller controller_utils): expectations, which
// keep a controller from acting on a cache that has not yet seen its own
// writes, and slow-start batches, which make a systematic create failure
// cost one call rather than hundreds.
package podcontrol

import (
	"errors"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// ExpectationsTimeout is how long expectations hold before their owner
// is acted on anyway (kube's ExpectationsTimeout).
const ExpectationsTimeout = 5 * time.Minute

// Expectations are the creates and deletes each controller waits to see in
// the pod cache (kube's UIDTrackingControllerExpectations). Records are
// keyed by the owner's key and remember its UID, so the pods of an
// earlier owner with the same name cannot lower the counts of a new one. Safe for concurrent use.
type Expectations struct {
	now     func() time.Time
	timeout time.Duration

	mu sync.Mutex
	m  map[string]*expectation
}

// expectation is what one owner waits for.
type expectation struct {
	owner types.UID
	adds  int
	dels  map[types.UID]struct{} // pods whose deletion is not seen yet
	at    time.Time
}

func NewExpectations(now func() time.Time, timeout time.Duration) *Expectations {
	return &Expectations{now: now, timeout: timeout, m: map[string]*expectation{}}
}

// Satisfied reports whether the owner key may be acted on: nothing is
// expected, everything expected was seen, or the record expired. When not,
// wait is how long until the record expires.
func (e *Expectations) Satisfied(key string) (ok bool, wait time.Duration) {
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

// Expect replaces the record of key: adds creates and the deletion of the
// pods dels are expected. It must be called before the writes are made, so
// the events they cause cannot come first.
func (e *Expectations) Expect(key string, owner types.UID, adds int, dels []types.UID) {
	x := &expectation{owner: owner, adds: adds, dels: make(map[types.UID]struct{}, len(dels)), at: e.now()}
	for _, u := range dels {
		x.dels[u] = struct{}{}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.m[key] = x
}

// CreationObserved lowers the creates key expects by one, if the pod's
// controller is the owner the record is for.
func (e *Expectations) CreationObserved(key string, owner types.UID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if x := e.m[key]; x != nil && x.owner == owner && x.adds > 0 {
		x.adds--
	}
}

// DeletionObserved marks the deletion of pod as seen. Seeing it twice (a
// deletionTimestamp, then the DELETED event) lowers the record once.
func (e *Expectations) DeletionObserved(key string, owner, pod types.UID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if x := e.m[key]; x != nil && x.owner == owner {
		delete(x.dels, pod)
	}
}

// Forget drops the record of an owner that is gone.
func (e *Expectations) Forget(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.m, key)
}

// SlowStart calls fn count times in batches of 1, 2, 4, ... (starting at
// initial), the calls of a batch in parallel, and stops after the first
// batch with a failure, so that a systematic error (quota, admission) costs
// one call, not count. It returns the number of successful calls and the
// errors of the failing batch (kube's slowStartBatch).
func SlowStart(count, initial int, fn func() error) (int, error) {
	done := 0
	for batch := min(count, initial); batch > 0; batch = min(2*batch, count-done) {
		var (
			wg   sync.WaitGroup
			mu   sync.Mutex
			ok   int
			errs []error
		)
		for range batch {
			wg.Go(func() {
				err := fn()
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					errs = append(errs, err)
					return
				}
				ok++
			})
		}
		wg.Wait()
		done += ok
		if len(errs) > 0 {
			return done, errors.Join(errs...)
		}
	}
	return done, nil
}
