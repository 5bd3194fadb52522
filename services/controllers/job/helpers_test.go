package job

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/events/consumer/consumertest"
	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const wait = 60 * time.Second

// start runs a control plane and the Job controller (as the controller
// manager) until the test ends, and creates namespace ns.
func start(t testing.TB, ns string, opts Options) *controlplanetest.Env {
	t.Helper()
	env := controlplanetest.Start(t)
	m := consumertest.Manager(t, env, controlplanetest.ControllerToken, controlplanetest.Logger("JOB_TEST_LOG"), nil)
	if _, err := New(m, opts); err != nil {
		t.Fatal(err)
	}
	controlplanetest.RunSynced(t, m)
	if _, err := env.Client.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return env
}

func ptr[T any](v T) *T { return &v }

func newJob(ns, name string, completions, parallelism *int32) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: batchv1.JobSpec{
			Completions: completions, Parallelism: parallelism, BackoffLimit: ptr[int32](6),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: "c", Image: "busybox"}},
			}},
		},
	}
}

func createJob(t testing.TB, env *controlplanetest.Env, j *batchv1.Job) *batchv1.Job {
	t.Helper()
	got, err := env.Client.BatchV1().Jobs(j.Namespace).Create(context.Background(), j, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create job: %v", err)
	}
	return got
}

func getJob(t testing.TB, env *controlplanetest.Env, ns, name string) *batchv1.Job {
	t.Helper()
	j, err := env.Client.BatchV1().Jobs(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get job: %v", err)
	}
	return j
}

// updateJob applies change to the Job's spec, retrying conflicts.
func updateJob(t testing.TB, env *controlplanetest.Env, ns, name string, change func(*batchv1.Job)) {
	t.Helper()
	for {
		j := getJob(t, env, ns, name)
		change(j)
		_, err := env.Client.BatchV1().Jobs(ns).Update(context.Background(), j, metav1.UpdateOptions{})
		if err == nil {
			return
		}
		if !apierrors.IsConflict(err) {
			t.Fatalf("update job: %v", err)
		}
	}
}

// waitJob waits for the Job's status to satisfy cond.
func waitJob(t testing.TB, env *controlplanetest.Env, ns, name, what string, cond func(*batchv1.Job) bool) *batchv1.Job {
	t.Helper()
	var j *batchv1.Job
	controlplanetest.Eventually(t, wait, name+": "+what, func() bool {
		j = getJob(t, env, ns, name)
		return cond(j)
	})
	return j
}

func hasCondition(j *batchv1.Job, typ batchv1.JobConditionType, reason string) bool {
	for _, c := range j.Status.Conditions {
		if c.Type == typ && c.Status == corev1.ConditionTrue && (reason == "" || c.Reason == reason) {
			return true
		}
	}
	return false
}

// jobPods lists the pods the Job with that UID controls, sorted by name.
func jobPods(t testing.TB, env *controlplanetest.Env, ns string, uid types.UID) []corev1.Pod {
	t.Helper()
	list, err := env.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list pods: %v", err)
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if ref := metav1.GetControllerOf(&p); ref != nil && ref.UID == uid {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// outcome is what the stand-in kubelet makes of a pod: its final phase
// and the exit code of its container (and conditions to add).
type outcome struct {
	phase      corev1.PodPhase
	exitCode   int32
	conditions []corev1.PodCondition
}

// kubelet is a stand-in for a node: every pod of ns it has not handled is
// set Running and Ready, then decide(pod) says when (after how many
// polls) and how it ends; a pod being deleted is removed at once
// (grace period 0), as a kubelet does once its containers stopped.
type kubelet struct {
	t      testing.TB
	env    *controlplanetest.Env
	ns     string
	mu     sync.Mutex
	decide func(p *corev1.Pod) *outcome // nil: keep running
	done   map[string]bool
}

func runKubelet(t testing.TB, env *controlplanetest.Env, ns string, decide func(p *corev1.Pod) *outcome) *kubelet {
	k := &kubelet{t: t, env: env, ns: ns, decide: decide, done: map[string]bool{}}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		for ctx.Err() == nil {
			k.round(ctx)
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
	return k
}

// setDecide changes how pods not finished yet end.
func (k *kubelet) setDecide(d func(p *corev1.Pod) *outcome) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.decide = d
}

func (k *kubelet) round(ctx context.Context) {
	pods, err := k.env.Client.CoreV1().Pods(k.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	k.mu.Lock()
	decide := k.decide
	k.mu.Unlock()
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.DeletionTimestamp != nil {
			_ = k.env.Client.CoreV1().Pods(k.ns).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr[int64](0)})
			continue
		}
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		now := metav1.Now()
		st := p.Status
		if o := decide(p); o != nil {
			st.Phase = o.phase
			st.Conditions = append([]corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: now}}, o.conditions...)
			// Finished a minute ago: the back-off of a failure has passed.
			at := metav1.NewTime(now.Add(-time.Minute))
			st.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: o.exitCode, FinishedAt: at}}}}
		} else if p.Status.Phase != corev1.PodRunning {
			st.Phase = corev1.PodRunning
			st.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now}}
		} else {
			continue
		}
		p.Status = st
		_, _ = k.env.Client.CoreV1().Pods(k.ns).UpdateStatus(ctx, p, metav1.UpdateOptions{})
	}
}

func succeed(*corev1.Pod) *outcome { return &outcome{phase: corev1.PodSucceeded} }
func fail(*corev1.Pod) *outcome    { return &outcome{phase: corev1.PodFailed, exitCode: 1} }
func keep(*corev1.Pod) *outcome    { return nil }

// podEvents reads every pod event of ns on the log.
func podEvents(t testing.TB, env *controlplanetest.Env, ns string) []*events.Event {
	t.Helper()
	controlplanetest.WaitForLog(t, env)
	var out []*events.Event
	err := events.Tail(context.Background(), env.JS, events.TailOptions{Resource: "pods", Namespace: ns}, func(ev *events.Event) error {
		out = append(out, ev)
		return nil
	})
	if err != nil {
		t.Fatalf("tail: %v", err)
	}
	return out
}

func podOf(t testing.TB, ev *events.Event) *corev1.Pod {
	t.Helper()
	var p corev1.Pod
	if err := json.Unmarshal(ev.Object, &p); err != nil {
		t.Fatalf("decode pod: %v", err)
	}
	return &p
}
