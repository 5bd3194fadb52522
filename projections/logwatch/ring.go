package logwatch

import (
	"sort"

	"github.com/cairn-dev/cairn/events"
)

// entry is one event of the log with its stream sequence.
type entry struct {
	seq uint64
	ev  *events.Event
}

// ring holds the last cap events of one stream in sequence order. It is not
// safe for concurrent use; the tail guards it.
type ring struct {
	buf   []entry
	start int // index of the oldest entry
	n     int
}

func newRing(capacity int) *ring { return &ring{buf: make([]entry, capacity)} }

func (r *ring) len() int { return r.n }

func (r *ring) at(i int) entry { return r.buf[(r.start+i)%len(r.buf)] }

// push appends e and returns the entry it evicted, if any.
func (r *ring) push(e entry) (entry, bool) {
	if r.n < len(r.buf) {
		r.buf[(r.start+r.n)%len(r.buf)] = e
		r.n++
		return entry{}, false
	}
	old := r.buf[r.start]
	r.buf[r.start] = e
	r.start = (r.start + 1) % len(r.buf)
	return old, true
}

// afterSeq returns the index of the first entry with sequence > seq.
func (r *ring) afterSeq(seq uint64) int {
	return sort.Search(r.n, func(i int) bool { return r.at(i).seq > seq })
}

// afterRev returns the index of the first entry with revision > rev.
func (r *ring) afterRev(rev events.Revision) int {
	return sort.Search(r.n, func(i int) bool { return r.at(i).ev.Revision > rev })
}

// collect returns the events from index i on that match m.
func (r *ring) collect(i int, m func(*events.Event) bool) []*events.Event {
	var out []*events.Event
	for ; i < r.n; i++ {
		if ev := r.at(i).ev; m(ev) {
			out = append(out, ev)
		}
	}
	return out
}
