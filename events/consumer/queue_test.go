package consumer

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/util/workqueue"
)

func fastLimiter() workqueue.TypedRateLimiter[string] {
	return workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Millisecond, 20*time.Millisecond)
}

func TestQueueCauses(t *testing.T) {
	q := NewQueue("", fastLimiter())
	defer q.ShutDown()
	c1, c2, c3 := Cause{EventID: "e1", CorrelationID: "r"}, Cause{EventID: "e2", CorrelationID: "r"}, Cause{EventID: "e3", CorrelationID: "r"}

	q.Add("k", c1)
	q.Add("k", c2)
	q.Add("k", Cause{}) // a zero cause keeps the pending one
	if q.Len() != 1 {
		t.Fatalf("len %d, want 1 (dedup)", q.Len())
	}
	key, cause, _ := q.Get()
	if key != "k" || cause != c2 {
		t.Fatalf("got %s %+v, want k with e2", key, cause)
	}
	q.Add("k", c3) // while processing: queued again after Done
	q.Done(key)
	key, cause, _ = q.Get()
	if cause != c3 {
		t.Fatalf("after re-add got %+v, want e3", cause)
	}
	q.AddRateLimited(key) // a retry keeps the cause
	q.Done(key)
	key, cause, _ = q.Get()
	if cause != c3 || q.NumRequeues(key) != 1 {
		t.Fatalf("retry got %+v after %d requeues, want e3 after 1", cause, q.NumRequeues(key))
	}
	q.Forget(key)
	q.Done(key)
	q.mu.Lock()
	left := len(q.causes) + len(q.taken)
	q.mu.Unlock()
	if left != 0 || q.NumRequeues(key) != 0 {
		t.Errorf("%d causes left, %d requeues, want none", left, q.NumRequeues(key))
	}
}

// TestQueueExclusive hammers a few keys from several producers while
// several workers process them: no key is ever processed by two workers at
// once, and every key is processed after its last Add.
func TestQueueExclusive(t *testing.T) {
	q := NewQueue("", fastLimiter())
	const keys, workers, adds = 10, 6, 2000
	var (
		mu       sync.Mutex
		inflight = map[string]bool{}
		lastAdd  = map[string]int64{}
		lastDone = map[string]int64{}
		clock    atomic.Int64
		bad      atomic.Int64
		done     atomic.Int64
	)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				key, _, shutdown := q.Get()
				if shutdown {
					return
				}
				mu.Lock()
				if inflight[key] {
					bad.Add(1)
				}
				inflight[key] = true
				started := clock.Add(1)
				mu.Unlock()
				time.Sleep(time.Duration(rand.IntN(200)) * time.Microsecond)
				mu.Lock()
				inflight[key] = false
				lastDone[key] = started
				mu.Unlock()
				done.Add(1)
				q.Forget(key)
				q.Done(key)
			}
		})
	}
	var prod sync.WaitGroup
	for p := range 3 {
		prod.Go(func() {
			for i := range adds {
				k := fmt.Sprintf("k%d", (i*7+p)%keys)
				mu.Lock()
				lastAdd[k] = clock.Add(1)
				mu.Unlock()
				q.Add(k, Cause{EventID: fmt.Sprint(i)})
				if i%4 == 0 {
					time.Sleep(50 * time.Microsecond)
				}
			}
		})
	}
	prod.Wait()
	eventually(t, 10*time.Second, "every key processed after its last add", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for k, a := range lastAdd {
			if lastDone[k] < a {
				return false
			}
		}
		return true
	})
	q.ShutDown()
	wg.Wait()
	if bad.Load() != 0 {
		t.Errorf("%d times a key was processed by two workers at once", bad.Load())
	}
	t.Logf("%d adds, %d reconciles", 3*adds, done.Load())
}

// TestController runs the controller loop with a reconciler that reports
// its calls.
func TestController(t *testing.T) {
	errFlaky := errors.New("flaky")
	for _, tc := range []struct {
		name string
		// fail returns the result of call n (0-based).
		fail      func(n int) (Result, error)
		owns      func(string) bool
		wantCalls int
	}{
		{"success", func(int) (Result, error) { return Result{}, nil }, nil, 1},
		{"retried until success", func(n int) (Result, error) {
			if n < 3 {
				return Result{}, fmt.Errorf("attempt %d: %w", n, errFlaky)
			}
			return Result{}, nil
		}, nil, 4},
		{"terminal error", func(int) (Result, error) { return Result{}, TerminalError(errFlaky) }, nil, 1},
		{"expected error is retried", func(n int) (Result, error) {
			if n < 2 {
				return Result{}, ExpectedError(fmt.Errorf("attempt %d: %w", n, errFlaky))
			}
			return Result{}, nil
		}, nil, 3},
		{"panic is retried", func(n int) (Result, error) {
			if n == 0 {
				panic("boom")
			}
			return Result{}, nil
		}, nil, 2},
		{"requeue after", func(n int) (Result, error) {
			if n < 2 {
				return Result{RequeueAfter: 5 * time.Millisecond}, nil
			}
			return Result{}, nil
		}, nil, 3},
		{"not owned", func(int) (Result, error) { return Result{}, nil }, func(string) bool { return false }, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var (
				mu     sync.Mutex
				causes []Cause
			)
			r := ReconcilerFunc(func(ctx context.Context, req Request) (Result, error) {
				mu.Lock()
				n := len(causes)
				causes = append(causes, CauseFrom(ctx))
				mu.Unlock()
				if req.Key != "ns/k" || req.Cause != CauseFrom(ctx) {
					t.Errorf("request %+v, ctx cause %+v", req, CauseFrom(ctx))
				}
				return tc.fail(n)
			})
			c, err := NewController(ControllerConfig{Name: "test", Reconciler: r, Workers: 2, Owns: tc.owns, RateLimiter: fastLimiter()})
			if err != nil {
				t.Fatal(err)
			}
			stop := run(t, c)
			cause := Cause{EventID: "ev", CorrelationID: "root"}
			c.Queue().Add("ns/k", cause) // straight to the queue: Owns is also checked before reconciling
			calls := func() int { mu.Lock(); defer mu.Unlock(); return len(causes) }
			if tc.wantCalls > 0 {
				eventually(t, 5*time.Second, fmt.Sprintf("%d calls", tc.wantCalls), func() bool { return calls() >= tc.wantCalls })
			}
			time.Sleep(100 * time.Millisecond)
			stop()
			if calls() != tc.wantCalls {
				t.Errorf("%d calls, want %d", calls(), tc.wantCalls)
			}
			for i, got := range causes {
				if got != cause {
					t.Errorf("call %d had cause %+v, want %+v", i, got, cause)
				}
			}
		})
	}

	t.Run("terminal error unwraps", func(t *testing.T) {
		err := fmt.Errorf("reconcile: %w", TerminalError(errFlaky))
		if !IsTerminal(err) || !errors.Is(err, errFlaky) || IsTerminal(errFlaky) || TerminalError(nil) != nil {
			t.Errorf("TerminalError does not wrap as documented: %v", err)
		}
		err = fmt.Errorf("reconcile: %w", ExpectedError(errFlaky))
		if !IsExpected(err) || !errors.Is(err, errFlaky) || IsExpected(errFlaky) || IsTerminal(err) || ExpectedError(nil) != nil {
			t.Errorf("ExpectedError does not wrap as documented: %v", err)
		}
	})
}
