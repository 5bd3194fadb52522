package manager

import (
	"fmt"
	"slices"
	"testing"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/events/consumer"
)

// TestSubjectPartitions: a replica follows exactly the subject partitions
// of the keys its sharder partitions hold.
func TestSubjectPartitions(t *testing.T) {
	for _, n := range []int{1, 4, 16, 32} {
		leased := []int{0, n - 1}
		parts := subjectPartitions(leased, n)
		for i := range 2000 {
			key := fmt.Sprintf("ns-%d/rs-%d", i%7, i)
			held := slices.Contains(leased, int(events.KeyHash(key)%uint32(n)))
			var sp int
			if _, err := fmt.Sscan(events.Partition(consumer.SplitKey(key)), &sp); err != nil {
				t.Fatal(err)
			}
			if slices.Contains(parts, sp) != held {
				t.Fatalf("n=%d: key %s in subject partition %d: followed %v, leased %v", n, key, sp, !held, held)
			}
		}
	}
	if got := subjectPartitions([]int{1}, 5); got != nil {
		t.Errorf("5 partitions (not a divisor of %d): %v, want nil (every pod)", events.Partitions, got)
	}
	if got := subjectPartitions(nil, 32); got == nil || len(got) != 0 {
		t.Errorf("nothing leased: %v, want an empty set (only pods without a controller)", got)
	}
}
