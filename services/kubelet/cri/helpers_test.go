package cri_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/ops/images"
	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
	"github.com/cairn-dev/cairn/services/kubelet"
	"github.com/cairn-dev/cairn/services/kubelet/container"
	"github.com/cairn-dev/cairn/services/kubelet/cri"
	"github.com/cairn-dev/cairn/services/kubelet/node"
	"github.com/cairn-dev/cairn/services/kubelet/node/nodetest"
	"github.com/cairn-dev/cairn/services/pki"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// grpc's and the node's background goroutines outlive single tests
		// inside their own cleanup; they are not the kubelet's.
		goleak.IgnoreTopFunction("google.golang.org/grpc/internal/grpcsync.(*CallbackSerializer).run"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
		// spdystream closes a connection in the background, waiting for
		// its streams for up to a minute (the test's port forwarder).
		goleak.IgnoreTopFunction("github.com/moby/spdystream.(*Connection).shutdown"),
	)
}

const (
	wait    = 60 * time.Second
	busybox = images.BusyboxRef
)

// rig is a control plane, a real node and a kubelet driving it.
type rig struct {
	t    *testing.T
	env  *controlplanetest.Env
	node *node.Runtime
	rt   *cri.Runtime
	dir  string // the kubelet's RootDir
	k    *kubelet.Kubelet
	stop func() // stops the kubelet (as a crash would: nothing is cleaned up)
	// pki is a cluster CA; the kubelet's ClientCAs trust it, and https
	// reaches the kubelet's API as the apiserver does (its kubelet client
	// certificate).
	pki   *pki.PKI
	https *http.Client
}

func newRig(t *testing.T, tweak func(*kubelet.Config)) *rig {
	t.Helper()
	env := controlplanetest.Start(t, controlplanetest.Options{NodeAuthorizer: true})
	nr := nodetest.Start(t)
	rt, err := cri.New(cri.Config{Runtime: nr.RuntimeService(), Image: nr.ImageService(), CgroupParent: nr.CgroupParent()})
	if err != nil {
		t.Fatal(err)
	}
	p, err := pki.Load(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{TLSClientConfig: p.KubeletClientTLSConfig()}
	t.Cleanup(tr.CloseIdleConnections)
	r := &rig{t: t, env: env, node: nr, rt: rt, dir: t.TempDir(), pki: p, https: &http.Client{Transport: tr}}
	// After the kubelet stops (as a crash: its pods keep their tmpfs
	// volumes), before the directory goes, as RunNode does after its node.
	t.Cleanup(func() {
		if err := kubelet.UnmountMemoryVolumes(r.dir); err != nil {
			t.Errorf("unmount in-memory volumes: %v", err)
		}
	})
	r.start(tweak)
	return r
}

// start runs a kubelet on the rig's node (again, after stop).
func (r *rig) start(tweak func(*kubelet.Config)) {
	r.t.Helper()
	cfg := kubelet.Config{
		RestConfig: r.env.Config, JS: r.env.JS, NodeName: "n1", Runtime: r.rt,
		NodeIP: r.node.Gateway().String(), RootDir: r.dir, Dial: r.node.DialContext,
		ServerAddr:   "127.0.0.1:0",
		ClientCAs:    r.pki.CAPool,
		RelistPeriod: 200 * time.Millisecond, BackOffInitial: time.Second, BackOffMax: 4 * time.Second,
		Log: controlplanetest.Logger("KUBELET_TEST_LOG"),
	}
	if tweak != nil {
		tweak(&cfg)
	}
	k, err := kubelet.New(cfg)
	if err != nil {
		r.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- k.Run(ctx) }()
	stopped := false
	r.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			r.t.Errorf("kubelet: %v", err)
		}
	}
	r.t.Cleanup(r.stop)
	r.k = k
	sctx, scancel := context.WithTimeout(ctx, wait)
	defer scancel()
	if err := k.Pods().WaitForSync(sctx); err != nil {
		r.t.Fatal(err)
	}
}

func (r *rig) create(p *corev1.Pod) *corev1.Pod {
	r.t.Helper()
	if p.Namespace == "" {
		p.Namespace = "default"
	}
	p.Spec.NodeName = "n1"
	for i := range p.Spec.Containers {
		if p.Spec.Containers[i].Image == "" {
			p.Spec.Containers[i].Image = busybox
		}
	}
	for i := range p.Spec.InitContainers {
		if p.Spec.InitContainers[i].Image == "" {
			p.Spec.InitContainers[i].Image = busybox
		}
	}
	out, err := r.env.Client.CoreV1().Pods(p.Namespace).Create(context.Background(), p, metav1.CreateOptions{})
	if err != nil {
		r.t.Fatalf("create pod %s: %v", p.Name, err)
	}
	return out
}

func (r *rig) get(name string) *corev1.Pod {
	r.t.Helper()
	p, err := r.env.Client.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		r.t.Fatalf("get pod %s: %v", name, err)
	}
	return p
}

// waitPod polls the pod until cond holds.
func (r *rig) waitPod(name, what string, cond func(p *corev1.Pod) bool) *corev1.Pod {
	r.t.Helper()
	var p *corev1.Pod
	deadline := time.Now().Add(wait)
	for {
		p = r.get(name)
		if cond(p) {
			return p
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("timed out waiting for pod %s: %s; last: %s", name, what, describe(p))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (r *rig) waitReady(name string) *corev1.Pod {
	return r.waitPod(name, "ready", func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodRunning && condition(p, corev1.PodReady) == corev1.ConditionTrue
	})
}

// criContainers lists, through the CRI directly, the pod's containers.
func (r *rig) criContainers(uid string) []*runtimeapi.Container {
	r.t.Helper()
	resp, err := r.node.RuntimeService().ListContainers(context.Background(), &runtimeapi.ListContainersRequest{
		Filter: &runtimeapi.ContainerFilter{LabelSelector: map[string]string{container.LabelPodUID: uid}}})
	if err != nil {
		r.t.Fatal(err)
	}
	return resp.Containers
}

func (r *rig) criSandboxes(uid string) []*runtimeapi.PodSandbox {
	r.t.Helper()
	resp, err := r.node.RuntimeService().ListPodSandbox(context.Background(), &runtimeapi.ListPodSandboxRequest{
		Filter: &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{container.LabelPodUID: uid}}})
	if err != nil {
		r.t.Fatal(err)
	}
	return resp.Items
}

// exec runs a command in the pod's running container through the CRI.
func (r *rig) exec(p *corev1.Pod, name string, cmd ...string) string {
	r.t.Helper()
	id := containerID(p, name)
	resp, err := r.node.RuntimeService().ExecSync(context.Background(), &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: cmd, Timeout: 10})
	if err != nil {
		r.t.Fatalf("exec %v: %v", cmd, err)
	}
	if resp.ExitCode != 0 {
		r.t.Fatalf("exec %v: exit %d: %s%s", cmd, resp.ExitCode, resp.Stdout, resp.Stderr)
	}
	return strings.TrimSpace(string(resp.Stdout))
}

// readLog reads the current log file of a container (CRI format).
func (r *rig) readLog(p *corev1.Pod, name string, attempt int) string {
	r.t.Helper()
	path := filepath.Join(r.dir, "logs", "pods", p.Namespace+"_"+p.Name+"_"+string(p.UID), name, fmt.Sprintf("%d.log", attempt))
	b, err := os.ReadFile(path)
	if err != nil {
		r.t.Fatalf("read log: %v", err)
	}
	return string(b)
}

func containerID(p *corev1.Pod, name string) string {
	for _, cs := range append(p.Status.ContainerStatuses, p.Status.InitContainerStatuses...) {
		if cs.Name == name {
			_, id, _ := strings.Cut(cs.ContainerID, "://")
			return id
		}
	}
	return ""
}

func status(p *corev1.Pod, name string) corev1.ContainerStatus {
	for _, cs := range append(p.Status.ContainerStatuses, p.Status.InitContainerStatuses...) {
		if cs.Name == name {
			return cs
		}
	}
	return corev1.ContainerStatus{}
}

func condition(p *corev1.Pod, t corev1.PodConditionType) corev1.ConditionStatus {
	for _, c := range p.Status.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}

func describe(p *corev1.Pod) string {
	s := fmt.Sprintf("phase=%s", p.Status.Phase)
	for _, c := range p.Status.Conditions {
		s += fmt.Sprintf(" %s=%s", c.Type, c.Status)
	}
	for _, cs := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
		s += fmt.Sprintf(" [%s restarts=%d ready=%v state=%s last=%s]", cs.Name, cs.RestartCount, cs.Ready, stateString(cs.State), stateString(cs.LastTerminationState))
	}
	return s
}

func stateString(s corev1.ContainerState) string {
	switch {
	case s.Running != nil:
		return "running"
	case s.Waiting != nil:
		return "waiting:" + s.Waiting.Reason + ":" + s.Waiting.Message
	case s.Terminated != nil:
		return fmt.Sprintf("terminated:%s:%d", s.Terminated.Reason, s.Terminated.ExitCode)
	}
	return "-"
}

func sh(script string) []string { return []string{"sh", "-c", script} }

// attemptStarts are the startedAt of each attempt of the pod's container
// "c", read from the pod's status history on the log.
func (r *rig) attemptStarts(p *corev1.Pod) []time.Time {
	r.t.Helper()
	controlplanetest.WaitForLog(r.t, r.env)
	byAttempt := map[int32]time.Time{}
	var attempts int32
	err := events.Tail(context.Background(), r.env.JS, events.TailOptions{Resource: "pods", Namespace: p.Namespace, Name: p.Name},
		func(ev *events.Event) error {
			var obj corev1.Pod
			if err := json.Unmarshal(ev.Object, &obj); err != nil {
				return err
			}
			cs := status(&obj, "c")
			// Running: lastState is the attempt before; waiting in
			// back-off: lastState is the current attempt, which exited.
			last := cs.LastTerminationState.Terminated
			switch {
			case cs.State.Running != nil:
				byAttempt[cs.RestartCount] = cs.State.Running.StartedAt.Time
				if last != nil && cs.RestartCount > 0 {
					byAttempt[cs.RestartCount-1] = last.StartedAt.Time
				}
			case cs.State.Waiting != nil && last != nil:
				byAttempt[cs.RestartCount] = last.StartedAt.Time
			}
			attempts = max(attempts, cs.RestartCount)
			return nil
		})
	if err != nil {
		r.t.Fatal(err)
	}
	var ts []time.Time
	for a := int32(0); a <= attempts; a++ {
		ts = append(ts, byAttempt[a])
	}
	return ts
}

// waitEvent waits for an Event the kubelet recorded about the object
// called name in ns with reason, whose message starts with msg, and
// returns it. On a timeout it lists the object's kubelet events.
func (r *rig) waitEvent(ns, name, reason, msg string) corev1.Event {
	r.t.Helper()
	deadline := time.Now().Add(wait)
	for {
		for _, ev := range controlplanetest.ListEvents(r.t, r.env, ns, name, reason) {
			if ev.Source.Component == kubelet.Component && strings.HasPrefix(ev.Message, msg) {
				if ev.Source.Host != "n1" || ev.ReportingController != kubelet.Component || ev.ReportingInstance != "n1" {
					r.t.Errorf("event %s %q: source %+v, reporting %s/%s", reason, ev.Message, ev.Source, ev.ReportingController, ev.ReportingInstance)
				}
				return ev
			}
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("no %s event %q... about %s; its events: %s", reason, msg, name, r.eventsAbout(ns, name))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// containerEvent is waitEvent for an event about container c of the pod
// called name; it checks the reference to the container.
func (r *rig) containerEvent(name, fieldPath, typ, reason, msg string) corev1.Event {
	r.t.Helper()
	ev := r.waitEvent("default", name, reason, msg)
	if ev.Type != typ || ev.InvolvedObject.Kind != "Pod" || ev.InvolvedObject.FieldPath != fieldPath || ev.InvolvedObject.UID == "" {
		r.t.Errorf("%s event %q: type %s, involvedObject %+v; want %s about %s", reason, ev.Message, ev.Type, ev.InvolvedObject, typ, fieldPath)
	}
	return ev
}

func (r *rig) eventsAbout(ns, name string) string {
	l, err := r.env.Client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, ev := range l.Items {
		fmt.Fprintf(&b, "\n  %s %s %s (%s, x%d): %s", ev.Type, ev.Reason, ev.Source.Component, ev.InvolvedObject.FieldPath, ev.Count, ev.Message)
	}
	return b.String()
}

// firstLogged is the first event on the log about the object of resource
// called name in ns: its create.
func (r *rig) firstLogged(resource, ns, name string) *events.Event {
	r.t.Helper()
	controlplanetest.WaitForLog(r.t, r.env)
	var out *events.Event
	err := events.Tail(context.Background(), r.env.JS, events.TailOptions{Resource: resource, Namespace: ns, Name: name},
		func(e *events.Event) error {
			if out == nil {
				out = e
			}
			return nil
		})
	if err != nil || out == nil {
		r.t.Fatalf("%s %s/%s on the log: %v, %v", resource, ns, name, out, err)
	}
	return out
}
