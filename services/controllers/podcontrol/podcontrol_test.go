package podcontrol

import (
	"errors"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

var t0 = time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)

func TestExpectations(t *testing.T) {
	now := t0
	e := NewExpectations(func() time.Time { return now }, time.Minute)
	const key = "ns/rs"
	if ok, _ := e.Satisfied(key); !ok {
		t.Fatal("no record: want satisfied")
	}
	e.Expect(key, "rs1", 2, nil)
	e.CreationObserved(key, "other-rs") // an older ReplicaSet of that name
	e.CreationObserved(key, "rs1")
	if ok, wait := e.Satisfied(key); ok || wait != time.Minute {
		t.Fatalf("1 of 2 creates seen: satisfied %v wait %v, want false 1m", ok, wait)
	}
	e.CreationObserved(key, "rs1")
	if ok, _ := e.Satisfied(key); !ok {
		t.Fatal("2 of 2 creates seen: want satisfied")
	}

	e.Expect(key, "rs1", 0, []types.UID{"p1", "p2"})
	e.DeletionObserved(key, "rs1", "p1")
	e.DeletionObserved(key, "rs1", "p1") // deletionTimestamp, then DELETED
	e.DeletionObserved(key, "rs1", "p3") // not one we deleted
	if ok, _ := e.Satisfied(key); ok {
		t.Fatal("1 of 2 deletes seen: want unsatisfied")
	}
	now = now.Add(40 * time.Second)
	if ok, wait := e.Satisfied(key); ok || wait != 20*time.Second {
		t.Fatalf("after 40s: satisfied %v wait %v, want false 20s", ok, wait)
	}
	now = now.Add(20 * time.Second)
	if ok, _ := e.Satisfied(key); !ok {
		t.Fatal("expired: want satisfied")
	}
	e.Forget(key)
	if ok, _ := e.Satisfied(key); !ok {
		t.Fatal("forgotten: want satisfied")
	}
}

func TestSlowStart(t *testing.T) {
	tests := []struct {
		name      string
		count     int
		failAt    int // the call number (1-based) that fails; 0: none
		wantOK    int
		wantCalls int
	}{
		{"all succeed", 10, 0, 10, 10},
		{"none", 0, 0, 0, 0},
		// Batches 1, 2, 4, 8: a failure in the third batch (calls 4-7)
		// stops before the fourth.
		{"stops after the failing batch", 20, 5, 6, 7},
		{"first call fails", 20, 1, 0, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls := 0
			var mu = make(chan struct{}, 1)
			ok, err := SlowStart(tt.count, 1, func() error {
				mu <- struct{}{}
				calls++
				n := calls
				<-mu
				if n == tt.failAt {
					return errors.New("boom")
				}
				return nil
			})
			if ok != tt.wantOK || calls != tt.wantCalls || (err != nil) != (tt.failAt > 0) {
				t.Errorf("slowStart = %d, %v after %d calls; want %d after %d", ok, err, calls, tt.wantOK, tt.wantCalls)
			}
		})
	}
}
