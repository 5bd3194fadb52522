package consumer

import (
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"
)

// Queue is a per-key work queue (client-go's rate-limiting workqueue) that
// also remembers, for each key, the cause of the latest Add: the event the
// work reacts to.
//
// The workqueue's guarantees hold: a key is queued at most once however
// often it is added; a key is never handed to two workers at once (an Add
// while it is processed queues it again after Done); AddRateLimited delays
// by the rate limiter (per-key exponential back-off by default) until
// Forget. Every Get must be followed by Done. Safe for concurrent use.
type Queue struct {
	q workqueue.TypedRateLimitingInterface[string]

	mu     sync.Mutex
	seq    uint64
	causes map[string]pending
	// taken is, for each key being processed, the seq of the cause Get
	// returned: Done keeps the cause only if something newer arrived.
	taken map[string]uint64
}

type pending struct {
	cause Cause
	seq   uint64
}

// NewQueue returns a queue. name labels the workqueue metrics; rl nil is
// workqueue.DefaultTypedControllerRateLimiter (5ms doubling to 1000s per
// key, 10 qps overall).
func NewQueue(name string, rl workqueue.TypedRateLimiter[string]) *Queue {
	if rl == nil {
		rl = workqueue.DefaultTypedControllerRateLimiter[string]()
	}
	return &Queue{
		q:      workqueue.NewTypedRateLimitingQueueWithConfig(rl, workqueue.TypedRateLimitingQueueConfig[string]{Name: name}),
		causes: map[string]pending{},
		taken:  map[string]uint64{},
	}
}

// note records that key was (re)queued with cause; a zero cause keeps the
// cause already pending.
func (q *Queue) note(key string, cause Cause) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.seq++
	p := q.causes[key]
	if !cause.IsZero() {
		p.cause = cause
	}
	p.seq = q.seq
	q.causes[key] = p
}

// Add queues key now, with the event that caused it.
func (q *Queue) Add(key string, cause Cause) {
	q.note(key, cause)
	q.q.Add(key)
}

// AddAfter queues key after d.
func (q *Queue) AddAfter(key string, cause Cause, d time.Duration) {
	q.note(key, cause)
	q.q.AddAfter(key, d)
}

// AddRateLimited queues key again after its back-off, keeping its cause.
func (q *Queue) AddRateLimited(key string) {
	q.note(key, Cause{})
	q.q.AddRateLimited(key)
}

// Forget resets key's back-off (call it when the work succeeded).
func (q *Queue) Forget(key string) { q.q.Forget(key) }

// NumRequeues is how many times key was rate-limited since its last Forget.
func (q *Queue) NumRequeues(key string) int { return q.q.NumRequeues(key) }

// Get blocks until a key is ready and returns it with the cause of its
// latest Add; shutdown is true once the queue is shut down (and, with
// ShutDownWithDrain, empty).
func (q *Queue) Get() (key string, cause Cause, shutdown bool) {
	key, shutdown = q.q.Get()
	if shutdown {
		return "", Cause{}, true
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	p := q.causes[key]
	q.taken[key] = p.seq
	return key, p.cause, false
}

// Done marks the processing of key finished. Its cause is forgotten unless
// the key was added again meanwhile.
func (q *Queue) Done(key string) {
	q.mu.Lock()
	if seq, ok := q.taken[key]; ok {
		if q.causes[key].seq == seq {
			delete(q.causes, key)
		}
		delete(q.taken, key)
	}
	q.mu.Unlock()
	q.q.Done(key)
}

// Len is the number of keys waiting (not those being processed).
func (q *Queue) Len() int { return q.q.Len() }

// ShutDown makes Get return shutdown at once; keys being processed finish.
func (q *Queue) ShutDown() { q.q.ShutDown() }

// ShuttingDown reports whether ShutDown was called.
func (q *Queue) ShuttingDown() bool { return q.q.ShuttingDown() }
