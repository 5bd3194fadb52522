package queue

import (
	"container/heap"
	"context"
	"errors"
	"sync"
	"time"

	fw "github.com/cairn-dev/cairn/services/scheduler/framework"
)

// ErrClosed is returned by Pop once the queue is closed.
var ErrClosed = errors.New("queue: closed")

// Defaults, as kube-scheduler's.
const (
	DefaultInitialBackoff     = time.Second
	DefaultMaxBackoff         = 10 * time.Second
	DefaultMaxInUnschedulable = 5 * time.Minute
)

// Config tunes a Queue.
type Config struct {
	// InitialBackoff doubles with every failed attempt up to MaxBackoff.
	InitialBackoff, MaxBackoff time.Duration
	// MaxInUnschedulable is how long a pod waits for a cluster event before
	// it is retried anyway.
	MaxInUnschedulable time.Duration
	// Clock is the time source; nil is time.Now.
	Clock func() time.Time
}

// Where a pod is.
type location int

const (
	inActive location = iota + 1
	inBackoff
	inUnschedulable
	inFlight
)

// QueuedPod is a pod in the queue with its scheduling history.
type QueuedPod struct {
	*fw.PodInfo
	// Timestamp is when the pod last entered the queue; among pods of equal
	// priority the earlier goes first.
	Timestamp time.Time
	// Attempts counts the scheduling attempts (Pops).
	Attempts int
	// InitialAttempt is when the pod was first popped.
	InitialAttempt time.Time
	// Cycle is the scheduling cycle of the latest Pop.
	Cycle int64

	where      location
	index      int
	updated    bool
	backoffEnd time.Time
	// next is the PodInfo of an update that came while the pod was in
	// flight: the scheduler reads PodInfo then without the queue's lock,
	// so it is swapped in only when the pod comes back.
	next *fw.PodInfo
}

// Queue is the scheduling queue: an active heap ordered by priority
// (higher first) then Timestamp, a back-off heap for pods that failed
// recently, and a pool of unschedulable pods waiting for a cluster change.
// Every pod is in at most one of them, or in flight (popped, being
// scheduled). Safe for concurrent use.
type Queue struct {
	cfg Config

	mu            sync.Mutex
	cond          *sync.Cond
	active        podHeap
	backoff       podHeap
	unschedulable map[string]*QueuedPod
	pods          map[string]*QueuedPod
	cycle         int64
	moveCycle     int64
	closed        bool
}

// New returns an empty queue.
func New(cfg Config) *Queue {
	if cfg.InitialBackoff <= 0 {
		cfg.InitialBackoff = DefaultInitialBackoff
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = DefaultMaxBackoff
	}
	if cfg.MaxInUnschedulable <= 0 {
		cfg.MaxInUnschedulable = DefaultMaxInUnschedulable
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	q := &Queue{cfg: cfg, unschedulable: map[string]*QueuedPod{}, pods: map[string]*QueuedPod{}}
	q.active.less = func(a, b *QueuedPod) bool {
		if a.Priority != b.Priority {
			return a.Priority > b.Priority
		}
		return a.Timestamp.Before(b.Timestamp)
	}
	q.backoff.less = func(a, b *QueuedPod) bool { return a.backoffEnd.Before(b.backoffEnd) }
	q.cond = sync.NewCond(&q.mu)
	return q
}

// Add queues a new pod as active. A pod already known is updated instead.
func (q *Queue) Add(pi *fw.PodInfo) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if qp := q.pods[pi.Key]; qp != nil {
		q.updateLocked(qp, pi)
		return
	}
	qp := &QueuedPod{PodInfo: pi, Timestamp: q.cfg.Clock()}
	q.pods[pi.Key] = qp
	q.pushActive(qp)
}

// Update replaces a queued pod's PodInfo. An unschedulable pod that changed
// is retried (after its back-off); a pod in flight is retried at once if
// its attempt fails. An unknown pod is added.
func (q *Queue) Update(pi *fw.PodInfo) {
	q.mu.Lock()
	defer q.mu.Unlock()
	qp := q.pods[pi.Key]
	if qp == nil {
		qp = &QueuedPod{PodInfo: pi, Timestamp: q.cfg.Clock()}
		q.pods[pi.Key] = qp
		q.pushActive(qp)
		return
	}
	q.updateLocked(qp, pi)
}

func (q *Queue) updateLocked(qp *QueuedPod, pi *fw.PodInfo) {
	if qp.where == inFlight {
		qp.next, qp.updated = pi, true
		return
	}
	qp.PodInfo = pi
	switch qp.where {
	case inActive:
		heap.Fix(&q.active, qp.index)
	case inUnschedulable:
		delete(q.unschedulable, qp.Key)
		q.requeue(qp)
	}
}

// back takes a pod out of flight: an update that came meanwhile applies.
func (qp *QueuedPod) back() {
	if qp.next != nil {
		qp.PodInfo, qp.next = qp.next, nil
	}
}

// Delete forgets a pod wherever it is.
func (q *Queue) Delete(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	qp := q.pods[key]
	if qp == nil {
		return
	}
	delete(q.pods, key)
	switch qp.where {
	case inActive:
		heap.Remove(&q.active, qp.index)
	case inBackoff:
		heap.Remove(&q.backoff, qp.index)
	case inUnschedulable:
		delete(q.unschedulable, key)
	}
}

// Pop blocks until a pod is active (or ctx ends, or Close) and returns the
// one with the highest priority, now in flight. The caller reports the
// outcome with Done (scheduled or gone), AddUnschedulable or AddBackoff.
func (q *Queue) Pop(ctx context.Context) (*QueuedPod, error) {
	stop := context.AfterFunc(ctx, func() {
		q.mu.Lock()
		q.cond.Broadcast()
		q.mu.Unlock()
	})
	defer stop()
	q.mu.Lock()
	defer q.mu.Unlock()
	for q.active.Len() == 0 {
		if q.closed {
			return nil, ErrClosed
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		q.cond.Wait()
	}
	qp := heap.Pop(&q.active).(*QueuedPod)
	q.cycle++
	qp.Cycle = q.cycle
	qp.Attempts++
	if qp.InitialAttempt.IsZero() {
		qp.InitialAttempt = q.cfg.Clock()
	}
	qp.where, qp.updated = inFlight, false
	return qp, nil
}

// Done forgets a pod whose attempt ended for good (bound, or no longer to
// be scheduled).
func (q *Queue) Done(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if qp := q.pods[key]; qp != nil && qp.where == inFlight {
		delete(q.pods, key)
	}
}

// AddUnschedulable returns a pod that fit nowhere. If the cluster changed
// since the pod was popped (a move request after its cycle began) or the
// pod itself changed, it goes to back-off, to be retried soon; otherwise
// it waits in the unschedulable pool for a cluster change. A pod deleted
// while in flight is dropped.
func (q *Queue) AddUnschedulable(qp *QueuedPod) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if cur := q.pods[qp.Key]; cur != qp || qp.where != inFlight {
		return
	}
	qp.back()
	qp.Timestamp = q.cfg.Clock()
	if q.moveCycle >= qp.Cycle || qp.updated {
		q.pushBackoff(qp)
		return
	}
	qp.where = inUnschedulable
	q.unschedulable[qp.Key] = qp
}

// AddBackoff returns a pod whose attempt failed for a transient reason (a
// binding conflict, an API error): it is retried after its back-off.
func (q *Queue) AddBackoff(qp *QueuedPod) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if cur := q.pods[qp.Key]; cur != qp || qp.where != inFlight {
		return
	}
	qp.back()
	qp.Timestamp = q.cfg.Clock()
	q.pushBackoff(qp)
}

// Requeue returns a pod in flight to the active heap at once, without
// back-off: its attempt failed only because the scheduler's view was stale
// (a binding refused as overcommitting after another replica filled the
// node), and the view has been brought up to date.
func (q *Queue) Requeue(qp *QueuedPod) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if cur := q.pods[qp.Key]; cur != qp || qp.where != inFlight {
		return
	}
	qp.back()
	q.pushActive(qp)
}

// MoveAllToActiveOrBackoff is called on a cluster change that could make
// unschedulable pods fit (a node added or changed, a pod deleted or
// finished): every unschedulable pod is retried, after its back-off, and
// pods in flight that fail go to back-off rather than the pool.
func (q *Queue) MoveAllToActiveOrBackoff() {
	q.mu.Lock()
	defer q.mu.Unlock()
	for key, qp := range q.unschedulable {
		delete(q.unschedulable, key)
		q.requeue(qp)
	}
	q.moveCycle = q.cycle
}

// requeue puts a pod in back-off if its back-off has not expired, else
// active.
func (q *Queue) requeue(qp *QueuedPod) {
	if q.cfg.Clock().Before(q.backoffEnd(qp)) {
		q.pushBackoff(qp)
		return
	}
	q.pushActive(qp)
}

func (q *Queue) backoffEnd(qp *QueuedPod) time.Time {
	d := q.cfg.InitialBackoff
	for i := 1; i < qp.Attempts && d < q.cfg.MaxBackoff; i++ {
		d *= 2
	}
	return qp.Timestamp.Add(min(d, q.cfg.MaxBackoff))
}

func (q *Queue) pushActive(qp *QueuedPod) {
	qp.where = inActive
	heap.Push(&q.active, qp)
	q.cond.Signal()
}

func (q *Queue) pushBackoff(qp *QueuedPod) {
	qp.where = inBackoff
	qp.backoffEnd = q.backoffEnd(qp)
	heap.Push(&q.backoff, qp)
}

// Flush moves pods whose back-off expired to active, and pods that waited
// in the unschedulable pool longer than MaxInUnschedulable to active or
// back-off. Run calls it periodically.
func (q *Queue) Flush() {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.cfg.Clock()
	for q.backoff.Len() > 0 && !now.Before(q.backoff.items[0].backoffEnd) {
		q.pushActive(heap.Pop(&q.backoff).(*QueuedPod))
	}
	for key, qp := range q.unschedulable {
		if now.Sub(qp.Timestamp) > q.cfg.MaxInUnschedulable {
			delete(q.unschedulable, key)
			q.requeue(qp)
		}
	}
}

// Run flushes the queue every interval until ctx ends, then closes it.
func (q *Queue) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			q.Close()
			return
		case <-t.C:
			q.Flush()
		}
	}
}

// Close wakes every Pop with ErrClosed.
func (q *Queue) Close() {
	q.mu.Lock()
	q.closed = true
	q.cond.Broadcast()
	q.mu.Unlock()
}

// Stats counts the pods in each part of the queue.
type Stats struct{ Active, Backoff, Unschedulable, InFlight int }

// Stats returns the queue's current counts.
func (q *Queue) Stats() Stats {
	q.mu.Lock()
	defer q.mu.Unlock()
	s := Stats{Active: q.active.Len(), Backoff: q.backoff.Len(), Unschedulable: len(q.unschedulable)}
	s.InFlight = len(q.pods) - s.Active - s.Backoff - s.Unschedulable
	return s
}

// Has reports whether the queue knows the pod (anywhere, in flight too).
func (q *Queue) Has(key string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.pods[key] != nil
}

// podHeap is a heap of pods that tracks each pod's index.
type podHeap struct {
	items []*QueuedPod
	less  func(a, b *QueuedPod) bool
}

func (h *podHeap) Len() int           { return len(h.items) }
func (h *podHeap) Less(i, j int) bool { return h.less(h.items[i], h.items[j]) }
func (h *podHeap) Swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.items[i].index, h.items[j].index = i, j
}
func (h *podHeap) Push(x any) {
	qp := x.(*QueuedPod)
	qp.index = len(h.items)
	h.items = append(h.items, qp)
}
func (h *podHeap) Pop() any {
	n := len(h.items) - 1
	qp := h.items[n]
	h.items[n] = nil
	h.items = h.items[:n]
	return qp
}
