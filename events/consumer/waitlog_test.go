package consumer

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
)

// TestWaitForLog: after WaitForLog returns, the cache holds every write that
// was acknowledged before the call.
func TestWaitForLog(t *testing.T) {
	env := controlplanetest.Start(t)
	ctx := testCtx(t, time.Minute)
	c := newCMCache(t, env, "default")
	run(t, c)
	if err := c.WaitForLog(ctx); err != nil {
		t.Fatalf("wait on an idle log: %v", err)
	}
	for round := 0; round < 5; round++ {
		var last string
		var lastRV events.Revision
		for i := 0; i < 20; i++ {
			cm, err := env.Client.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("w-%d-%d", round, i)}}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			last = cm.Name
			lastRV, _ = events.ParseRevision(cm.ResourceVersion)
		}
		// WaitForLog covers what is on the log; the writes get there first.
		if err := events.WaitPublished(ctx, env.JS, lastRV); err != nil {
			t.Fatal(err)
		}
		if err := c.WaitForLog(ctx); err != nil {
			t.Fatal(err)
		}
		if _, ok := c.Get("default", last); !ok {
			t.Fatalf("round %d: %s acknowledged before WaitForLog but not in the cache after it", round, last)
		}
	}
}

// timingOutJS is a JetStream whose first fails Stream lookups time out, as
// JetStream's API does while a stream's replicas change or its meta
// leader is elected.
type timingOutJS struct {
	jetstream.JetStream
	fails atomic.Int32
}

func (j *timingOutJS) Stream(ctx context.Context, name string) (jetstream.Stream, error) {
	if j.fails.Add(-1) >= 0 {
		return nil, fmt.Errorf("stream info: %w", context.DeadlineExceeded)
	}
	return j.JetStream.Stream(ctx, name)
}

// TestWaitForLogRetries: WaitForLog waits through JetStream API timeouts
// (a server that joined died of one at start-up) and still covers every
// acknowledged write; with ctx done it gives up with the last error.
func TestWaitForLogRetries(t *testing.T) {
	env := controlplanetest.Start(t)
	ctx := testCtx(t, time.Minute)
	js := &timingOutJS{JetStream: env.JS}
	c, err := NewCache(CacheConfig[*corev1.ConfigMap]{Resource: configmaps, Namespace: "default", Config: env.Config, JS: js})
	if err != nil {
		t.Fatal(err)
	}
	run(t, c)
	if err := c.WaitForSync(ctx); err != nil {
		t.Fatal(err)
	}
	cm, err := env.Client.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "after-timeouts"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rv, _ := events.ParseRevision(cm.ResourceVersion)
	if err := events.WaitPublished(ctx, env.JS, rv); err != nil {
		t.Fatal(err)
	}
	js.fails.Store(3)
	if err := c.WaitForLog(ctx); err != nil {
		t.Fatalf("WaitForLog after 3 timeouts: %v", err)
	}
	if n := js.fails.Load(); n >= 0 {
		t.Fatalf("the lookups did not time out as set up (%d left)", n+1)
	}
	if _, ok := c.Get("default", cm.Name); !ok {
		t.Fatal("a write acknowledged before WaitForLog is not in the cache after it")
	}

	js.fails.Store(1 << 20)
	short, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := c.WaitForLog(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitForLog with the API timing out until ctx ends: %v, want a deadline error", err)
	}
}
