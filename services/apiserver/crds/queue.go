package crds

import (
	"sync"
	"time"
)

// queue is a set of definition names to reconcile, each handed to one
// worker at a time; a name added while it is being worked on comes back
// once that work is done.
type queue struct {
	mu      sync.Mutex
	pending map[string]bool
	order   []string
	busy    map[string]bool
	wake    chan struct{}
}

func newQueue() *queue {
	return &queue{pending: map[string]bool{}, busy: map[string]bool{}, wake: make(chan struct{}, 1)}
}

func (q *queue) add(name string) {
	q.mu.Lock()
	if !q.pending[name] {
		q.pending[name] = true
		q.order = append(q.order, name)
	}
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// addAfter adds name after d (a retry).
func (q *queue) addAfter(name string, d time.Duration) {
	time.AfterFunc(d, func() { q.add(name) })
}

// next returns a pending name that no one works on, or "".
func (q *queue) next() string {
	q.mu.Lock()
	defer q.mu.Unlock()
	for i, n := range q.order {
		if q.busy[n] {
			continue
		}
		q.order = append(q.order[:i:i], q.order[i+1:]...)
		delete(q.pending, n)
		q.busy[n] = true
		return n
	}
	return ""
}

func (q *queue) done(name string) {
	q.mu.Lock()
	delete(q.busy, name)
	again := q.pending[name]
	q.mu.Unlock()
	if again {
		select {
		case q.wake <- struct{}{}:
		default:
		}
	}
}
