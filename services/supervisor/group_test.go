package supervisor

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// TestGroup: runners added before and while the group runs stop with it;
// Wait returns after all of them; the first error stops the others and is
// Wait's and Err's; a context error after the stop is a clean exit.
func TestGroup(t *testing.T) {
	var returned atomic.Int32
	blocking := RunnerFunc(func(ctx context.Context) error {
		<-ctx.Done()
		time.Sleep(50 * time.Millisecond)
		returned.Add(1)
		return ctx.Err()
	})
	ctx, cancel := context.WithCancel(context.Background())
	g := NewGroup(ctx)
	g.Go("a", blocking)
	g.Go("b", blocking)
	cancel()
	if err := g.Wait(); err != nil {
		t.Fatalf("Wait after cancel: %v", err)
	}
	if n := returned.Load(); n != 2 {
		t.Errorf("Wait returned with %d of 2 runners returned", n)
	}
	g.Go("late", RunnerFunc(func(context.Context) error { t.Error("started after the stop"); return nil }))

	boom := errors.New("boom")
	g = NewGroup(context.Background())
	g.Go("slow", blocking)
	g.Go("failing", RunnerFunc(func(context.Context) error { return boom }))
	if err := g.Wait(); !errors.Is(err, boom) || err.Error() != "failing: boom" {
		t.Errorf("Wait = %v, want failing: boom", err)
	}
	select {
	case err := <-g.Err():
		if !errors.Is(err, boom) {
			t.Errorf("Err = %v", err)
		}
	default:
		t.Error("Err has nothing")
	}
	if n := returned.Load(); n != 3 {
		t.Errorf("Wait returned before the slow runner")
	}
	if err := RunAll(context.Background(), RunnerFunc(func(context.Context) error { return boom }), blocking); !errors.Is(err, boom) {
		t.Errorf("RunAll = %v", err)
	}
}
