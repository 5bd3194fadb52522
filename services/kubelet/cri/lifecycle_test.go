package cri_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
)

func TestProbes(t *testing.T) {
	r := newRig(t, nil)
	r.create(&corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "probed"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "web",
			// The page appears after 2s: readiness must wait for it.
			Command: sh("mkdir -p /www; (sleep 2; echo ok > /www/index.html) & exec httpd -f -p 8080 -h /www"),
			Ports:   []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
			StartupProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}},
				PeriodSeconds: 1, FailureThreshold: 5},
			ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
				Path: "/index.html", Port: intstr.FromString("http")}}, PeriodSeconds: 1},
			LivenessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{
				Port: intstr.FromInt32(8080)}}, PeriodSeconds: 1},
		}}},
	})
	p := r.waitPod("probed", "running", func(p *corev1.Pod) bool { return status(p, "web").State.Running != nil })
	if cs := status(p, "web"); cs.Ready {
		t.Errorf("ready before the readiness probe passed: %s", describe(p))
	}
	p = r.waitReady("probed")
	// Healthy: the liveness probe never kills it.
	time.Sleep(3 * time.Second)
	if p = r.get("probed"); status(p, "web").RestartCount != 0 || condition(p, corev1.PodReady) != corev1.ConditionTrue {
		t.Errorf("healthy container: %s", describe(p))
	}

	// Readiness follows the probe: remove the page.
	r.exec(p, "web", "rm", "/www/index.html")
	r.waitPod("probed", "not ready", func(p *corev1.Pod) bool {
		return condition(p, corev1.PodReady) == corev1.ConditionFalse && !status(p, "web").Ready
	})
	r.containerEvent("probed", "spec.containers{web}", corev1.EventTypeWarning, "Unhealthy", "Readiness probe failed: HTTP probe failed with statuscode: 404")
}

func TestLivenessFailureRestarts(t *testing.T) {
	r := newRig(t, nil)
	for _, tc := range []struct {
		name  string
		probe corev1.ProbeHandler
	}{
		{"exec", corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"false"}}}},
		{"http", corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(9999)}}},
		{"tcp", corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(9999)}}},
	} {
		r.create(&corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "live-" + tc.name},
			Spec: corev1.PodSpec{TerminationGracePeriodSeconds: ptr.To(int64(1)), Containers: []corev1.Container{{
				Name: "c", Command: []string{"sleep", "3600"},
				LivenessProbe: &corev1.Probe{ProbeHandler: tc.probe, PeriodSeconds: 1, FailureThreshold: 2},
			}}},
		})
	}
	for _, name := range []string{"live-exec", "live-http", "live-tcp"} {
		p := r.waitPod(name, "restarted by liveness", func(p *corev1.Pod) bool {
			cs := status(p, "c")
			return cs.RestartCount >= 1 && cs.LastTerminationState.Terminated != nil
		})
		if term := status(p, "c").LastTerminationState.Terminated; term.ExitCode != 137 || term.Reason != "Error" {
			t.Errorf("%s: last state %+v", name, term)
		}
		r.containerEvent(name, "spec.containers{c}", corev1.EventTypeWarning, "Unhealthy", "Liveness probe failed: ")
		r.containerEvent(name, "spec.containers{c}", corev1.EventTypeNormal, "Killing", "Container c failed liveness probe, will be restarted")
	}
}

func TestStartupProbeFailureKills(t *testing.T) {
	r := newRig(t, nil)
	r.create(&corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "slow"},
		Spec: corev1.PodSpec{TerminationGracePeriodSeconds: ptr.To(int64(1)), Containers: []corev1.Container{{
			Name: "c", Command: []string{"sleep", "3600"},
			StartupProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"false"}}},
				PeriodSeconds: 1, FailureThreshold: 2},
		}}},
	})
	p := r.waitPod("slow", "running, not started", func(p *corev1.Pod) bool { return status(p, "c").State.Running != nil })
	if cs := status(p, "c"); ptr.Deref(cs.Started, true) || cs.Ready {
		t.Errorf("started before the startup probe passed: %+v", cs)
	}
	r.waitPod("slow", "killed by startup probe", func(p *corev1.Pod) bool { return status(p, "c").RestartCount >= 1 })
	r.containerEvent("slow", "spec.containers{c}", corev1.EventTypeWarning, "Unhealthy", "Startup probe failed: ")
	r.containerEvent("slow", "spec.containers{c}", corev1.EventTypeNormal, "Killing", "Container c failed startup probe, will be restarted")
}

func TestInitContainers(t *testing.T) {
	r := newRig(t, nil)
	vol := []corev1.VolumeMount{{Name: "work", MountPath: "/work"}}
	r.create(&corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "init"},
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{
				// Long enough to be seen running by polling on a loaded machine.
				{Name: "first", Command: sh("sleep 3; echo first >> /work/order"), VolumeMounts: vol},
				{Name: "second", Command: sh("echo second >> /work/order"), VolumeMounts: vol},
			},
			Containers: []corev1.Container{{Name: "main", Command: sh("echo main >> /work/order; exec sleep 3600"), VolumeMounts: vol}},
			Volumes:    []corev1.Volume{{Name: "work", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		},
	})
	p := r.waitPod("init", "initializing", func(p *corev1.Pod) bool { return status(p, "first").State.Running != nil })
	if p.Status.Phase != corev1.PodPending || condition(p, corev1.PodInitialized) != corev1.ConditionFalse ||
		status(p, "main").State.Waiting == nil || status(p, "main").State.Waiting.Reason != "PodInitializing" {
		t.Errorf("while initializing: %s", describe(p))
	}
	p = r.waitReady("init")
	for _, name := range []string{"first", "second"} {
		if term := status(p, name).State.Terminated; term == nil || term.ExitCode != 0 || term.Reason != "Completed" {
			t.Errorf("init container %s: %s", name, describe(p))
		}
	}
	if condition(p, corev1.PodInitialized) != corev1.ConditionTrue {
		t.Errorf("initialized: %s", describe(p))
	}
	if got := r.exec(p, "main", "cat", "/work/order"); got != "first\nsecond\nmain" {
		t.Errorf("order: %q", got)
	}
	r.containerEvent("init", "spec.initContainers{first}", corev1.EventTypeNormal, "Started", "Started container first")
	r.containerEvent("init", "spec.containers{main}", corev1.EventTypeNormal, "Started", "Started container main")
}

func TestInitContainerFailureNever(t *testing.T) {
	r := newRig(t, nil)
	r.create(&corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "badinit"},
		Spec: corev1.PodSpec{
			RestartPolicy:  corev1.RestartPolicyNever,
			InitContainers: []corev1.Container{{Name: "fail", Command: sh("exit 3")}},
			Containers:     []corev1.Container{{Name: "main", Command: []string{"sleep", "3600"}}},
		},
	})
	p := r.waitPod("badinit", "failed", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
	if term := status(p, "fail").State.Terminated; term == nil || term.ExitCode != 3 || term.Reason != "Error" {
		t.Errorf("init status: %s", describe(p))
	}
	if len(r.criContainers(string(p.UID))) != 1 {
		t.Errorf("main container was created after a failed init container")
	}
}

func TestRestartPolicies(t *testing.T) {
	r := newRig(t, nil)
	cases := []struct {
		name   string
		policy corev1.RestartPolicy
		script string
		phase  corev1.PodPhase
		reason string
		code   int32
	}{
		{"never-ok", corev1.RestartPolicyNever, "exit 0", corev1.PodSucceeded, "Completed", 0},
		{"never-fail", corev1.RestartPolicyNever, "exit 2", corev1.PodFailed, "Error", 2},
		{"onfailure-ok", corev1.RestartPolicyOnFailure, "exit 0", corev1.PodSucceeded, "Completed", 0},
	}
	for _, c := range cases {
		r.create(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: c.name}, Spec: corev1.PodSpec{RestartPolicy: c.policy,
			Containers: []corev1.Container{{Name: "c", Command: sh(c.script)}}}})
	}
	for _, c := range cases {
		p := r.waitPod(c.name, string(c.phase), func(p *corev1.Pod) bool { return p.Status.Phase == c.phase })
		cs := status(p, "c")
		if cs.State.Terminated == nil || cs.State.Terminated.Reason != c.reason || cs.State.Terminated.ExitCode != c.code || cs.RestartCount != 0 {
			t.Errorf("%s: %s", c.name, describe(p))
		}
		if condition(p, corev1.PodReady) != corev1.ConditionFalse {
			t.Errorf("%s: ready after finishing", c.name)
		}
	}
	// OnFailure restarts a failing container, until it succeeds.
	r.create(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "onfailure"}, Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyOnFailure,
		Volumes: []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		Containers: []corev1.Container{{Name: "c", VolumeMounts: []corev1.VolumeMount{{Name: "v", MountPath: "/v"}},
			Command: sh("if [ -e /v/once ]; then exit 0; fi; touch /v/once; exit 1")}}}})
	p := r.waitPod("onfailure", "succeeded", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })
	if cs := status(p, "c"); cs.RestartCount != 1 || cs.LastTerminationState.Terminated == nil || cs.LastTerminationState.Terminated.ExitCode != 1 {
		t.Errorf("onfailure: %s", describe(p))
	}
}

// TestCrashLoopBackOff: a crashing container is restarted at once, then
// after 1s, 2s, 4s, 4s (the rig's back-off: 1s doubling to 4s), and waits
// in CrashLoopBackOff meanwhile.
func TestCrashLoopBackOff(t *testing.T) {
	r := newRig(t, nil)
	r.create(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "crash"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Command: sh("echo crashing; exit 1")}}}})
	p := r.waitPod("crash", "CrashLoopBackOff", func(p *corev1.Pod) bool {
		w := status(p, "c").State.Waiting
		return w != nil && w.Reason == "CrashLoopBackOff"
	})
	cs := status(p, "c")
	if cs.LastTerminationState.Terminated == nil || cs.LastTerminationState.Terminated.ExitCode != 1 ||
		cs.LastTerminationState.Terminated.Reason != "Error" || p.Status.Phase != corev1.PodRunning || cs.Ready {
		t.Errorf("in back-off: %s", describe(p))
	}
	p = r.waitPod("crash", "4 restarts", func(p *corev1.Pod) bool { return status(p, "c").RestartCount >= 4 })
	// The start of every attempt, from the status history on the log: the
	// gaps grow with the back-off (lower bounds: the restart must not come
	// sooner).
	starts := r.attemptStarts(p)
	want := []time.Duration{0, 0, time.Second, 2 * time.Second, 4 * time.Second}
	for i := 2; i < len(starts) && i < len(want); i++ {
		// startedAt has a resolution of one second.
		if gap := starts[i].Sub(starts[i-1]); gap < want[i]-time.Second {
			t.Errorf("attempt %d started %v after attempt %d, want about %v", i, gap, i-1, want[i])
		}
	}
	t.Logf("attempt starts: %v", starts)
	r.containerEvent("crash", "spec.containers{c}", corev1.EventTypeWarning, "BackOff",
		fmt.Sprintf("Back-off restarting failed container c in pod crash_default(%s)", p.UID))
	// Every sync in back-off records it again: one event counts them.
	controlplanetest.Eventually(t, wait, "one BackOff event counting repeats", func() bool {
		evs := controlplanetest.ListEvents(t, r.env, "default", "crash", "BackOff")
		return len(evs) == 1 && evs[0].Count >= 2
	})
}

func TestGracefulTermination(t *testing.T) {
	r := newRig(t, nil)
	ctx := context.Background()
	// One container exits on SIGTERM; one ignores it (sleep as pid 1) and
	// is killed when the grace period ends.
	r.create(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "polite"}, Spec: corev1.PodSpec{TerminationGracePeriodSeconds: ptr.To(int64(30)),
		Containers: []corev1.Container{{Name: "c", Command: sh("trap 'echo bye; exit 0' TERM; sleep 3600 & wait")}}}})
	r.create(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "stubborn"}, Spec: corev1.PodSpec{TerminationGracePeriodSeconds: ptr.To(int64(3)),
		Containers: []corev1.Container{{Name: "c", Command: []string{"sleep", "3600"}}}}})
	polite, stubborn := r.waitReady("polite"), r.waitReady("stubborn")

	for _, tc := range []struct {
		pod      *corev1.Pod
		min, max time.Duration
	}{
		{polite, 0, 20 * time.Second},
		{stubborn, 3 * time.Second, 30 * time.Second},
	} {
		start := time.Now()
		if err := r.env.Client.CoreV1().Pods("default").Delete(ctx, tc.pod.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		for {
			_, err := r.env.Client.CoreV1().Pods("default").Get(ctx, tc.pod.Name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				break
			}
			if time.Since(start) > wait {
				t.Fatalf("%s not deleted", tc.pod.Name)
			}
			time.Sleep(50 * time.Millisecond)
		}
		took := time.Since(start)
		t.Logf("%s: deleted after %v", tc.pod.Name, took)
		if took < tc.min || took > tc.max {
			t.Errorf("%s: deletion took %v, want between %v and %v", tc.pod.Name, took, tc.min, tc.max)
		}
		// Everything is gone: containers, sandbox, the pod's directories.
		if c, s := r.criContainers(string(tc.pod.UID)), r.criSandboxes(string(tc.pod.UID)); len(c)+len(s) > 0 {
			t.Errorf("%s: %d containers and %d sandboxes left", tc.pod.Name, len(c), len(s))
		}
		if _, err := os.Stat(r.dir + "/pods/" + string(tc.pod.UID)); !os.IsNotExist(err) {
			t.Errorf("%s: pod dir left: %v", tc.pod.Name, err)
		}
		r.containerEvent(tc.pod.Name, "spec.containers{c}", corev1.EventTypeNormal, "Killing", "Stopping container c")
	}
}
