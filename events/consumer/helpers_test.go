package consumer

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var configmaps = corev1.SchemeGroupVersion.WithResource("configmaps")

// testCtx is a context that ends with the test or after d.
func testCtx(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// run runs r until the test ends; the cleanup waits for it to return.
func run(t *testing.T, r Runner) context.CancelFunc {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// eventually polls cond until it holds or d passes.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func mkNamespace(t *testing.T, env *controlplanetest.Env, name string) {
	t.Helper()
	_, err := env.Client.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
}

func cm(ns, name string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: data}
}

func mustCreate(t *testing.T, env *controlplanetest.Env, c *corev1.ConfigMap) *corev1.ConfigMap {
	t.Helper()
	got, err := env.Client.CoreV1().ConfigMaps(c.Namespace).Create(context.Background(), c, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create %s/%s: %v", c.Namespace, c.Name, err)
	}
	return got
}

func mustUpdate(t *testing.T, env *controlplanetest.Env, c *corev1.ConfigMap) *corev1.ConfigMap {
	t.Helper()
	got, err := env.Client.CoreV1().ConfigMaps(c.Namespace).Update(context.Background(), c, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update %s/%s: %v", c.Namespace, c.Name, err)
	}
	return got
}

func mustDelete(t *testing.T, env *controlplanetest.Env, ns, name string) {
	t.Helper()
	if err := env.Client.CoreV1().ConfigMaps(ns).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete %s/%s: %v", ns, name, err)
	}
}

func rev(t *testing.T, obj metav1.Object) events.Revision {
	t.Helper()
	r, err := events.ParseRevision(obj.GetResourceVersion())
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// eventAt reads the event of one revision from the log, waiting for the
// publisher.
func eventAt(t *testing.T, env *controlplanetest.Env, ns, name string, r events.Revision) *events.Event {
	t.Helper()
	var found *events.Event
	eventually(t, 10*time.Second, fmt.Sprintf("event %d on the log", r), func() bool {
		err := events.Tail(context.Background(), env.JS, events.TailOptions{Namespace: ns, Name: name, FromRevision: r}, func(ev *events.Event) error {
			if ev.Revision == r && found == nil {
				found = ev
			}
			return nil
		})
		if err != nil {
			t.Fatalf("tail: %v", err)
		}
		return found != nil
	})
	return found
}

// recorder is a Handler that records what it is told, one line a call:
// "ADD ns/name <revision> <event id or ->".
type recorder struct {
	mu    sync.Mutex
	lines []string
	evs   []*events.Event
}

func (r *recorder) handler() Handler[*corev1.ConfigMap] {
	return Handler[*corev1.ConfigMap]{
		OnAdd:    func(obj *corev1.ConfigMap, ev *events.Event) { r.add("ADD", obj, ev) },
		OnUpdate: func(_, obj *corev1.ConfigMap, ev *events.Event) { r.add("UPDATE", obj, ev) },
		OnDelete: func(obj *corev1.ConfigMap, ev *events.Event) { r.add("DELETE", obj, ev) },
	}
}

func (r *recorder) add(op string, obj *corev1.ConfigMap, ev *events.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	line := op + " " + KeyOf(obj)
	if ev != nil {
		line += " ev"
		if ev.Namespace != obj.Namespace || ev.Name != obj.Name || ev.Revision.String() != obj.ResourceVersion {
			line += fmt.Sprintf(" MISMATCH(%s/%s@%d vs %s)", ev.Namespace, ev.Name, ev.Revision, obj.ResourceVersion)
		}
	}
	r.lines = append(r.lines, line)
	r.evs = append(r.evs, ev)
}

func (r *recorder) take() ([]string, []*events.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	l, e := r.lines, r.evs
	r.lines, r.evs = nil, nil
	return l, e
}

func (r *recorder) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.lines)
}

func wantLines(t *testing.T, got, want []string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("handler calls:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func newCMCache(t *testing.T, env *controlplanetest.Env, ns string) *Cache[*corev1.ConfigMap] {
	t.Helper()
	c, err := NewCache(CacheConfig[*corev1.ConfigMap]{Resource: configmaps, Namespace: ns, Config: env.Config, JS: env.JS})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
