package consumer

import (
	"context"
	"maps"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/services/apiserver"
	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
)

// copier keeps a configmap "<name>-copy" with the data of every configmap
// "<name>": a toy controller.
type copier struct {
	cache  *Cache[*corev1.ConfigMap]
	client kubernetes.Interface
}

func (c copier) Reconcile(ctx context.Context, req Request) (Result, error) {
	ns, name := req.NamespaceName()
	cms := c.client.CoreV1().ConfigMaps(ns)
	src, ok := c.cache.Get(ns, name)
	if !ok {
		err := cms.Delete(ctx, name+"-copy", metav1.DeleteOptions{})
		if apierrors.IsNotFound(err) {
			return Result{}, nil
		}
		return Result{}, err
	}
	dst, ok := c.cache.Get(ns, name+"-copy")
	switch {
	case !ok:
		// AlreadyExists means the cache lags our own write: retry.
		_, err := cms.Create(ctx, cm(ns, name+"-copy", src.Data), metav1.CreateOptions{})
		return Result{}, err
	case !maps.Equal(dst.Data, src.Data):
		d := dst.DeepCopy()
		d.Data = src.Data
		_, err := cms.Update(ctx, d, metav1.UpdateOptions{})
		return Result{}, err
	}
	return Result{}, nil
}

// copyKeys maps a copy to its source, so a change to the copy is repaired.
func copyKeys(obj *corev1.ConfigMap) []string {
	return []string{Key(obj.Namespace, strings.TrimSuffix(obj.Name, "-copy"))}
}

// TestControllerCausation runs the copier on the real control plane and
// follows the causal chain on the log: every write the reconciler makes
// carries the id of the event that triggered it and that event's
// correlation id.
func TestControllerCausation(t *testing.T) {
	env := controlplanetest.Start(t)
	mkNamespace(t, env, "c")
	mustCreate(t, env, cm("c", "pre", map[string]string{"a": "1"}))

	cache := newCMCache(t, env, "c")
	cs, err := kubernetes.NewForConfig(WrapConfig(env.ConfigFor(controlplanetest.ControllerToken)))
	if err != nil {
		t.Fatal(err)
	}
	ctrl, err := NewController(ControllerConfig{
		Name: "copier", Reconciler: copier{cache: cache, client: cs}, Workers: 3,
		WaitFor: []Syncer{cache}, RateLimiter: fastLimiter(),
	})
	if err != nil {
		t.Fatal(err)
	}
	Watch(cache, ctrl, copyKeys)
	run(t, runAll{cache, ctrl})

	// copied waits for the copy of name to hold data and returns the event
	// that wrote it.
	copied := func(name string, data map[string]string) *events.Event {
		t.Helper()
		var dst *corev1.ConfigMap
		eventually(t, 10*time.Second, name+"-copy", func() bool {
			var ok bool
			dst, ok = cache.Get("c", name+"-copy")
			return ok && maps.Equal(dst.Data, data)
		})
		return eventAt(t, env, "c", name+"-copy", rev(t, dst))
	}

	t.Run("from the snapshot", func(t *testing.T) {
		ev := copied("pre", map[string]string{"a": "1"})
		if ev.CausationID != "" || ev.CorrelationID != ev.ID || ev.Actor.User != apiserver.UserControllers {
			t.Errorf("copy made at start: causation %q correlation %q (id %s) actor %q, want a new chain by the controller manager",
				ev.CausationID, ev.CorrelationID, ev.ID, ev.Actor.User)
		}
	})

	src := mustCreate(t, env, cm("c", "s1", map[string]string{"k": "v1"}))
	t.Run("create", func(t *testing.T) {
		cause := eventAt(t, env, "c", "s1", rev(t, src))
		ev := copied("s1", map[string]string{"k": "v1"})
		if ev.CausationID != cause.ID || ev.CorrelationID != cause.ID || ev.Verb != "create" {
			t.Errorf("copy event: causation %q correlation %q verb %s, want both %q", ev.CausationID, ev.CorrelationID, ev.Verb, cause.ID)
		}
	})

	t.Run("update in a chain", func(t *testing.T) {
		// The update is itself part of a chain: its correlation id must
		// reach the copy's event unchanged.
		upstream := Cause{EventID: "01UPSTREAM", CorrelationID: "01ROOT"}
		admin, err := kubernetes.NewForConfig(WrapConfig(env.Config))
		if err != nil {
			t.Fatal(err)
		}
		s := src.DeepCopy()
		s.Data["k"] = "v2"
		s, err = admin.CoreV1().ConfigMaps("c").Update(WithCause(context.Background(), upstream), s, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cause := eventAt(t, env, "c", "s1", rev(t, s))
		if cause.CausationID != upstream.EventID || cause.CorrelationID != upstream.CorrelationID {
			t.Fatalf("WrapConfig did not set the headers: event %+v", cause)
		}
		ev := copied("s1", map[string]string{"k": "v2"})
		if ev.CausationID != cause.ID || ev.CorrelationID != upstream.CorrelationID || ev.Verb != "update" {
			t.Errorf("copy event: causation %q correlation %q verb %s, want %q and %q", ev.CausationID, ev.CorrelationID, ev.Verb, cause.ID, upstream.CorrelationID)
		}
	})

	t.Run("drift and delete", func(t *testing.T) {
		d, ok := cache.Get("c", "s1-copy")
		if !ok {
			t.Fatal("no copy")
		}
		d = d.DeepCopy()
		d.Data["k"] = "tampered"
		mustUpdate(t, env, d)
		copied("s1", map[string]string{"k": "v2"})
		mustDelete(t, env, "c", "s1")
		eventually(t, 10*time.Second, "the copy to go", func() bool { _, ok := cache.Get("c", "s1-copy"); return !ok })
	})
}

// runAll runs several runners as one.
type runAll []Runner

func (r runAll) Run(ctx context.Context) error { return RunAll(ctx, r...) }
