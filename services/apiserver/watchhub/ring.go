package watchhub

import (
	"sort"

	"github.com/cairn-dev/cairn/events"
)

// ring holds the last cap records of one stream in sequence order. It is not
// safe for concurrent use; the tail guards it.
type ring struct {
	buf   []*record
	start int // index of the oldest entry
	n     int
}

func newRing(capacity int) *ring { return &ring{buf: make([]*record, capacity)} }

func (r *ring) len() int { return r.n }

func (r *ring) at(i int) *record { return r.buf[(r.start+i)%len(r.buf)] }

// push appends e and returns the record it evicted, if any.
func (r *ring) push(e *record) (*record, bool) {
	if r.n < len(r.buf) {
		r.buf[(r.start+r.n)%len(r.buf)] = e
		r.n++
		return nil, false
	}
	old := r.buf[r.start]
	r.buf[r.start] = e
	r.start = (r.start + 1) % len(r.buf)
	return old, true
}

// afterSeq returns the index of the first record with sequence > seq.
func (r *ring) afterSeq(seq uint64) int {
	return sort.Search(r.n, func(i int) bool { return r.at(i).seq > seq })
}

// afterRev returns the index of the first record with revision > rev.
func (r *ring) afterRev(rev events.Revision) int {
	return sort.Search(r.n, func(i int) bool { return r.at(i).rev > rev })
}

// collect returns the records from index i on that match m.
func (r *ring) collect(i int, m func(*record) bool) []*record {
	var out []*record
	for ; i < r.n; i++ {
		if rec := r.at(i); m(rec) {
			out = append(out, rec)
		}
	}
	return out
}
