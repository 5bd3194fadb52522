package consumer

import (
	"fmt"
	"testing"
	"time"

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
