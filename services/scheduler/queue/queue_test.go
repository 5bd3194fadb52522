package queue

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fw "github.com/cairn-dev/cairn/services/scheduler/framework"
)

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Step(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func pod(name string, prio int32) *fw.PodInfo {
	return fw.NewPodInfo(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}, prio)
}

func newQueue() (*Queue, *clock) {
	c := &clock{now: time.Unix(1000, 0)}
	return New(Config{Clock: c.Now}), c
}

func pop(t *testing.T, q *Queue) *QueuedPod {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	qp, err := q.Pop(ctx)
	if err != nil {
		t.Fatalf("Pop: %v", err)
	}
	return qp
}

func TestOrder(t *testing.T) {
	tests := []struct {
		name string
		adds []*fw.PodInfo
		want []string
	}{
		{"priority first", []*fw.PodInfo{pod("low", 1), pod("high", 100), pod("mid", 50)}, []string{"high", "mid", "low"}},
		{"then arrival", []*fw.PodInfo{pod("a", 5), pod("b", 5), pod("c", 5)}, []string{"a", "b", "c"}},
		{"mixed", []*fw.PodInfo{pod("a", 0), pod("b", 10), pod("c", 0), pod("d", 10)}, []string{"b", "d", "a", "c"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q, c := newQueue()
			for _, p := range tc.adds {
				q.Add(p)
				c.Step(time.Millisecond)
			}
			for _, want := range tc.want {
				if got := pop(t, q); got.Pod.Name != want {
					t.Fatalf("popped %s, want %s", got.Pod.Name, want)
				}
			}
		})
	}
}

func TestUnschedulableWaitsForClusterEvent(t *testing.T) {
	q, c := newQueue()
	q.Add(pod("p", 0))
	qp := pop(t, q)
	q.AddUnschedulable(qp)
	if s := q.Stats(); s.Unschedulable != 1 {
		t.Fatalf("stats %+v, want 1 unschedulable", s)
	}
	c.Step(time.Minute)
	q.Flush()
	if s := q.Stats(); s.Unschedulable != 1 || s.Active != 0 {
		t.Fatalf("a flush without event moved it: %+v", s)
	}
	q.MoveAllToActiveOrBackoff()
	if s := q.Stats(); s.Active != 1 {
		t.Fatalf("after the event %+v, want active (back-off long over)", s)
	}
	qp = pop(t, q)
	if qp.Attempts != 2 {
		t.Fatalf("attempts %d", qp.Attempts)
	}
	q.Done(qp.Key)
	if q.Has(qp.Key) {
		t.Fatal("Done did not forget the pod")
	}
}

func TestEventDuringFlightGoesToBackoff(t *testing.T) {
	q, c := newQueue()
	q.Add(pod("p", 0))
	qp := pop(t, q)
	q.MoveAllToActiveOrBackoff() // e.g. a node was added while p was being scheduled
	q.AddUnschedulable(qp)
	if s := q.Stats(); s.Backoff != 1 {
		t.Fatalf("stats %+v, want back-off", s)
	}
	c.Step(999 * time.Millisecond)
	q.Flush()
	if s := q.Stats(); s.Backoff != 1 {
		t.Fatalf("left back-off early: %+v", s)
	}
	c.Step(2 * time.Millisecond)
	q.Flush()
	if s := q.Stats(); s.Active != 1 {
		t.Fatalf("after 1s %+v, want active", s)
	}
}

func TestBackoffDoubles(t *testing.T) {
	q, c := newQueue()
	q.Add(pod("p", 0))
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second}
	for i, d := range want {
		qp := pop(t, q)
		q.AddBackoff(qp)
		c.Step(d - time.Millisecond)
		q.Flush()
		if q.Stats().Active != 0 {
			t.Fatalf("attempt %d: active before %v", i+1, d)
		}
		c.Step(time.Millisecond)
		q.Flush()
		if q.Stats().Active != 1 {
			t.Fatalf("attempt %d: not active after %v", i+1, d)
		}
	}
}

func TestDeleteAndUpdate(t *testing.T) {
	q, c := newQueue()
	q.Add(pod("a", 0))
	q.Add(pod("b", 0))
	q.Delete("ns/a")
	if got := pop(t, q); got.Pod.Name != "b" {
		t.Fatalf("popped %s", got.Pod.Name)
	}
	// Deleted while in flight: the failed attempt does not bring it back.
	q.Delete("ns/b")
	q.AddUnschedulable(&QueuedPod{PodInfo: pod("b", 0)})
	if q.Has("ns/b") {
		t.Fatal("deleted pod came back")
	}
	// Updated while unschedulable: retried.
	q.Add(pod("c", 0))
	qp := pop(t, q)
	q.AddUnschedulable(qp)
	c.Step(time.Minute)
	q.Update(pod("c", 7))
	if got := pop(t, q); got.Priority != 7 {
		t.Fatalf("updated pod has priority %d", got.Priority)
	}
	// Priority change re-sorts the active heap.
	q.Add(pod("d", 1))
	q.Add(pod("e", 2))
	q.Update(pod("d", 3))
	if got := pop(t, q); got.Pod.Name != "d" {
		t.Fatalf("popped %s, want d after its priority rose", got.Pod.Name)
	}
}

// TestUpdateInFlight: an update of a pod in flight does not touch the
// PodInfo its scheduler is reading (with -race, reading it concurrently
// with Update is checked); it applies when the pod comes back, which it
// does through back-off.
func TestUpdateInFlight(t *testing.T) {
	for _, back := range []string{"AddUnschedulable", "AddBackoff", "Requeue"} {
		t.Run(back, func(t *testing.T) {
			q, c := newQueue()
			q.Add(pod("a", 1))
			qp := pop(t, q)
			old := qp.PodInfo
			done := make(chan struct{})
			go func() {
				defer close(done)
				q.Update(pod("a", 9))
			}()
			_ = qp.PodInfo.Key // what the scheduler does meanwhile
			<-done
			if qp.PodInfo != old {
				t.Fatal("PodInfo of a pod in flight replaced")
			}
			switch back {
			case "AddUnschedulable":
				q.AddUnschedulable(qp)
			case "AddBackoff":
				q.AddBackoff(qp)
			case "Requeue":
				q.Requeue(qp)
			}
			c.Step(time.Minute)
			q.Flush()
			if got := pop(t, q); got.Priority != 9 {
				t.Fatalf("after %s: priority %d, want the update's 9", back, got.Priority)
			}
		})
	}
}

func TestUnschedulableTimeout(t *testing.T) {
	q, c := newQueue()
	q.Add(pod("p", 0))
	q.AddUnschedulable(pop(t, q))
	c.Step(DefaultMaxInUnschedulable + time.Second)
	q.Flush()
	if s := q.Stats(); s.Active != 1 {
		t.Fatalf("stats %+v, want active after the pool timeout", s)
	}
}

func TestPopBlocksAndCloses(t *testing.T) {
	q, _ := newQueue()
	got := make(chan string)
	go func() {
		qp, err := q.Pop(context.Background())
		if err != nil {
			got <- err.Error()
			return
		}
		got <- qp.Pod.Name
	}()
	time.Sleep(10 * time.Millisecond)
	q.Add(pod("late", 0))
	if name := <-got; name != "late" {
		t.Fatalf("got %s", name)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := q.Pop(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Pop on cancelled ctx: %v", err)
	}
	q.Close()
	if _, err := q.Pop(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Pop after Close: %v", err)
	}
}
