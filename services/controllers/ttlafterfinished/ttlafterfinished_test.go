package ttlafterfinished

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/events/consumer/consumertest"
	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type clock struct {
	mu  sync.Mutex
	off time.Duration
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.off)
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.off += d
}

func ptr[T any](v T) *T { return &v }

// TestTTLAfterFinished: a finished Job with ttlSecondsAfterFinished is
// deleted once the TTL passed (foreground, as kube, with the delete caused
// by the event the controller reacted to) and not before; one without a
// TTL, or not finished, stays.
func TestTTLAfterFinished(t *testing.T) {
	const ns = "ttl"
	env := controlplanetest.Start(t)
	clk := &clock{}
	m := consumertest.Manager(t, env, controlplanetest.ControllerToken, controlplanetest.Logger("TTL_TEST_LOG"), nil)
	if _, err := New(m, Options{Clock: clk.Now}); err != nil {
		t.Fatal(err)
	}
	controlplanetest.RunSynced(t, m)
	ctx := context.Background()
	if _, err := env.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	jobs := env.Client.BatchV1().Jobs(ns)
	mk := func(name string, ttl *int32, done bool) {
		j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: batchv1.JobSpec{TTLSecondsAfterFinished: ttl,
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}}}
		j, err := jobs.Create(ctx, j, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !done {
			return
		}
		now := metav1.Now()
		j.Status.StartTime = &now
		j.Status.CompletionTime = &now
		j.Status.Succeeded = 1
		j.Status.Conditions = []batchv1.JobCondition{
			{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now}}
		if _, err := jobs.UpdateStatus(ctx, j, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	mk("now", ptr[int32](0), true)
	mk("later", ptr[int32](100), true)
	mk("never", nil, true)
	mk("running", ptr[int32](0), false)

	// gone: deleted, or held by the foreground finalizer (no garbage
	// collector runs here).
	gone := func(name string) bool {
		j, err := jobs.Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err) || err == nil && j.DeletionTimestamp != nil
	}
	controlplanetest.Eventually(t, 30*time.Second, "job with ttl 0 deleted", func() bool { return gone("now") })
	if j, err := jobs.Get(ctx, "now", metav1.GetOptions{}); err == nil && !slices.Contains(j.Finalizers, metav1.FinalizerDeleteDependents) {
		t.Errorf("finalizers %v: want foreground deletion", j.Finalizers)
	}
	time.Sleep(500 * time.Millisecond)
	for _, name := range []string{"later", "never", "running"} {
		if gone(name) {
			t.Errorf("job %s deleted", name)
		}
	}
	clk.advance(101 * time.Second)
	// Touch it: the controller's own requeue waits in real time.
	j, err := jobs.Get(ctx, "later", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	j.Labels = map[string]string{"touched": "yes"}
	if _, err := jobs.Update(ctx, j, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	controlplanetest.Eventually(t, 30*time.Second, "job with ttl 100 deleted after 101s", func() bool { return gone("later") })
	for _, name := range []string{"never", "running"} {
		if gone(name) {
			t.Errorf("job %s deleted", name)
		}
	}
	// The delete carries a cause.
	controlplanetest.WaitForLog(t, env)
	var deleting *events.Event
	err = events.Tail(ctx, env.JS, events.TailOptions{Group: "batch", Resource: "jobs", Namespace: ns, Name: "later"}, func(ev *events.Event) error {
		deleting = ev
		return nil
	})
	if err != nil || deleting == nil {
		t.Fatalf("tail: %v", err)
	}
	if deleting.CausationID == "" {
		t.Errorf("the delete of job later (event %s %s) has no cause", deleting.ID, deleting.Type)
	}
}
