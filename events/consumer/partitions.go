package consumer

import (
	"slices"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cairn-dev/cairn/events"
)

// partitionSet is what a partitioned cache follows: the objects whose
// controller is in one of parts (events.Partition tokens), and every
// object without a controller. A nil *partitionSet follows everything.
type partitionSet struct {
	parts map[string]bool
}

// keeps reports whether s follows obj.
func (s *partitionSet) keeps(obj metav1.Object) bool {
	if s == nil {
		return true
	}
	ref := metav1.GetControllerOfNoCopy(obj)
	return ref == nil || s.parts[events.Partition(obj.GetNamespace(), ref.Name)]
}

// covers reports whether s follows everything t follows.
func (s *partitionSet) covers(t *partitionSet) bool {
	switch {
	case s == nil:
		return true
	case t == nil:
		return false
	}
	for p := range t.parts {
		if !s.parts[p] {
			return false
		}
	}
	return true
}

// filters are the subject filters of s on top of base (a cache's
// events.Filter), whose last token is the partition wildcard.
func (s *partitionSet) filters(base string) []string {
	if s == nil {
		return []string{base}
	}
	stem := base[:len(base)-1]
	out := []string{stem + events.Empty}
	for p := range s.parts {
		out = append(out, stem+p)
	}
	slices.Sort(out)
	return out
}

// SetPartitions restricts the cache to the objects whose controller owner
// is in one of parts (subject partitions, see events.Partition: 0 to
// events.Partitions-1) and to the objects without a controller; nil
// follows every object again. The tail is restarted with one subject
// filter per partition, so the server sends only those events. A cache
// that gains partitions takes a new snapshot (the objects of the new
// partitions are not in it yet); one that only loses partitions forgets
// their objects without calling handlers (they were not deleted).
//
// An object that moves to a partition the cache does not follow (its
// controller changes: the apiserver publishes such events on no partition,
// so every cache gets them) is forgotten the same way, after the handlers
// have seen the change.
//
// It returns at once; WaitForLog waits until the cache follows parts. Asking
// again for the same partitions changes nothing.
func (c *Cache[T]) SetPartitions(parts []int) {
	var s *partitionSet
	if parts != nil {
		s = &partitionSet{parts: make(map[string]bool, len(parts))}
		for _, p := range parts {
			s.parts[strconv.Itoa(p)] = true
		}
	}
	c.pmu.Lock()
	defer c.pmu.Unlock()
	if c.pgen > 0 && s.covers(c.want) && c.want.covers(s) {
		return
	}
	c.pgen++
	c.want = s
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// Partial reports whether the cache follows only some partitions: an
// object of another partition may exist and not be in it.
func (c *Cache[T]) Partial() bool {
	c.pmu.Lock()
	defer c.pmu.Unlock()
	return c.want != nil
}

// wanted is the set SetPartitions last asked for, and its generation.
func (c *Cache[T]) wanted() (*partitionSet, uint64) {
	c.pmu.Lock()
	defer c.pmu.Unlock()
	return c.want, c.pgen
}

// forget drops, without calling handlers, the objects s no longer
// follows. A tombstone at the cache's revision keeps a redelivered event
// from bringing one back.
func (c *Cache[T]) forget(s *partitionSet) {
	c.dispatchMu.Lock()
	defer c.dispatchMu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	for key, e := range c.st.items {
		if !s.keeps(e.obj) {
			c.st.remove(key, c.Revision(), now)
		}
	}
}
