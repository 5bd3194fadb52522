package kubelet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/cairn-dev/cairn/events/consumer"
	"github.com/cairn-dev/cairn/services/kubelet/container"
)

// retryAfter is how soon a sync that failed on the runtime or the
// apiserver runs again.
const retryAfter = time.Second

// syncPod is one level-triggered round for w's pod, as the kubelet's
// syncPod: it compares the pod in the API with what the runtime holds and
// makes one step towards the spec. It returns when to sync again (0: after
// ResyncPeriod, or sooner on a kick) and whether the worker is finished
// (the pod is gone from the API and from the runtime).
func (k *Kubelet) syncPod(ctx context.Context, w *worker, log *slog.Logger) (time.Duration, bool) {
	pod, ok := k.pods.Get(w.namespace, w.name)
	if ok && pod.UID != w.uid {
		pod, ok = nil, false
	}
	rs, err := k.rt.PodStatus(ctx, string(w.uid))
	if err != nil {
		k.logErr(ctx, "runtime pod status", err)
		return retryAfter, false
	}
	if !ok {
		return k.syncGone(ctx, w, rs, log)
	}
	ctx = consumer.WithCause(ctx, w.getCause())
	switch {
	case pod.DeletionTimestamp != nil:
		return k.syncTerminating(ctx, w, pod, rs, log), false
	case isTerminalPhase(pod.Status.Phase):
		// Finished: nothing restarts. Make sure nothing runs.
		k.stopPod(ctx, pod, rs, log)
		return 0, false
	}
	return k.syncRunning(ctx, w, pod, rs, log), false
}

// syncGone removes a pod the API no longer has (deleted, or force-deleted
// behind the kubelet's back): it kills what still runs, removes it, and
// finishes once the runtime holds nothing of it.
func (k *Kubelet) syncGone(ctx context.Context, w *worker, rs *container.PodStatus, log *slog.Logger) (time.Duration, bool) {
	if len(rs.Sandboxes) == 0 && len(rs.Containers) == 0 {
		if err := k.teardownVolumes(ctx, w.uid); err != nil {
			k.logErr(ctx, "unmount volumes", err)
			return retryAfter, false
		}
		k.removePodDirs(string(w.uid), w.namespace, w.name)
		return 0, true
	}
	log.Info("removing pod that is gone from the API")
	k.killContainers(ctx, nil, rs, minGrace, log)
	if err := k.removePod(ctx, rs); err != nil {
		k.logErr(ctx, "remove pod", err)
		return retryAfter, false
	}
	return 10 * time.Millisecond, false
}

// minGrace is the shortest grace period a container gets (the kubelet's
// minimumGracePeriodInSeconds).
const minGrace = 2 * time.Second

// syncTerminating runs a graceful delete to its end: stop every container
// with the pod's grace period (SIGTERM, then SIGKILL), report the final
// status, remove containers and sandbox, and delete the pod for good
// (gracePeriodSeconds=0), as the kubelet's status manager does.
func (k *Kubelet) syncTerminating(ctx context.Context, w *worker, pod *corev1.Pod, rs *container.PodStatus, log *slog.Logger) time.Duration {
	if w.deleted() {
		return retryAfter
	}
	grace := 30 * time.Second
	if g := pod.DeletionGracePeriodSeconds; g != nil {
		grace = time.Duration(*g) * time.Second
	} else if g := pod.Spec.TerminationGracePeriodSeconds; g != nil {
		grace = time.Duration(*g) * time.Second
	}
	k.killContainers(ctx, pod, rs, max(grace, minGrace), log)
	for _, sb := range rs.Sandboxes {
		if sb.State == container.SandboxReady {
			if err := k.rt.StopSandbox(ctx, sb.ID); err != nil && !errors.Is(err, container.ErrNotFound) {
				k.logErr(ctx, "stop sandbox", err)
				return retryAfter
			}
		}
	}
	rs, err := k.rt.PodStatus(ctx, string(w.uid))
	if err != nil {
		k.logErr(ctx, "runtime pod status", err)
		return retryAfter
	}
	w.resetWaiting()
	if err := k.writeStatus(ctx, w, pod, k.podStatus(pod, rs, w, true)); err != nil {
		k.logErr(ctx, "final pod status", err)
		return retryAfter
	}
	if err := k.removePod(ctx, rs); err != nil {
		k.logErr(ctx, "remove pod", err)
		return retryAfter
	}
	// As kube's status manager, the pod goes from the API only once its
	// volumes are unmounted.
	if err := k.teardownVolumes(ctx, pod.UID); err != nil {
		k.logErr(ctx, "unmount volumes", err)
		return retryAfter
	}
	k.removePodDirs(string(pod.UID), pod.Namespace, pod.Name)
	if err := k.deletePod(ctx, pod); err != nil {
		k.logErr(ctx, "delete pod", err)
		return retryAfter
	}
	w.markDeleted()
	log.Info("pod terminated and deleted")
	return 0
}

// stopPod stops the containers and sandbox of a finished pod, keeping them
// (and their logs) until the pod is deleted.
func (k *Kubelet) stopPod(ctx context.Context, pod *corev1.Pod, rs *container.PodStatus, log *slog.Logger) {
	grace := 30 * time.Second
	if g := pod.Spec.TerminationGracePeriodSeconds; g != nil {
		grace = time.Duration(*g) * time.Second
	}
	k.killContainers(ctx, pod, rs, max(grace, minGrace), log)
	for _, sb := range rs.Sandboxes {
		if sb.State == container.SandboxReady {
			k.logErr(ctx, "stop sandbox", k.rt.StopSandbox(ctx, sb.ID))
		}
	}
}

// killContainers stops every running or created container, all at once,
// each with the grace period, recording Killing for each unless pod is
// nil (a pod gone from the API).
func (k *Kubelet) killContainers(ctx context.Context, pod *corev1.Pod, rs *container.PodStatus, grace time.Duration, log *slog.Logger) {
	done := make(chan struct{})
	n := 0
	for _, c := range rs.Containers {
		if c.State == container.StateExited {
			continue
		}
		n++
		go func() {
			defer func() { done <- struct{}{} }()
			log.Debug("stopping container", "container", c.Name, "id", c.ID, "grace", grace)
			if pod != nil {
				k.containerEventf(ctx, pod, c.Name, corev1.EventTypeNormal, ReasonKilling, "Stopping container %s", c.Name)
			}
			if err := k.rt.StopContainer(ctx, c.ID, grace); err != nil && !errors.Is(err, container.ErrNotFound) {
				k.logErr(ctx, "stop container "+c.Name, err)
			}
		}()
	}
	for range n {
		<-done
	}
}

// removePod removes the containers and sandboxes of a pod.
func (k *Kubelet) removePod(ctx context.Context, rs *container.PodStatus) error {
	for _, c := range rs.Containers {
		if err := k.rt.RemoveContainer(ctx, c.ID); err != nil && !errors.Is(err, container.ErrNotFound) {
			return fmt.Errorf("remove container %s: %w", c.Name, err)
		}
	}
	for _, sb := range rs.Sandboxes {
		if err := k.rt.StopSandbox(ctx, sb.ID); err != nil && !errors.Is(err, container.ErrNotFound) {
			return fmt.Errorf("stop sandbox: %w", err)
		}
		if err := k.rt.RemoveSandbox(ctx, sb.ID); err != nil && !errors.Is(err, container.ErrNotFound) {
			return fmt.Errorf("remove sandbox: %w", err)
		}
	}
	return nil
}

// syncRunning moves a live pod towards its spec: a ready sandbox, then the
// init containers one by one, then every app container, restarted by its
// restart policy with back-off. It writes the status after each step.
func (k *Kubelet) syncRunning(ctx context.Context, w *worker, pod *corev1.Pod, rs *container.PodStatus, log *slog.Logger) time.Duration {
	sb := rs.Sandbox()
	running := sb != nil && sb.State == container.SandboxReady
	if !running {
		if sb != nil && ranToCompletion(pod, rs) {
			// The sandbox is gone but nothing is to be restarted.
			k.finish(ctx, w, pod, rs)
			return 0
		}
		next, ok := k.createSandbox(ctx, w, pod, rs, log)
		if !ok {
			return next
		}
		var err error
		if rs, err = k.rt.PodStatus(ctx, string(pod.UID)); err != nil {
			k.logErr(ctx, "runtime pod status", err)
			return retryAfter
		}
	}
	k.refreshTokens(ctx, pod)
	if running && k.csi != nil {
		k.expandCSIVolumes(ctx, pod) // setupCSIVolumes expanded a new sandbox's
	}
	next := k.syncContainers(ctx, w, pod, rs, log)
	rs, err := k.rt.PodStatus(ctx, string(pod.UID))
	if err != nil {
		k.logErr(ctx, "runtime pod status", err)
		return retryAfter
	}
	k.probes.sync(pod, rs)
	st := k.podStatus(pod, rs, w, false)
	if isTerminalPhase(st.Phase) {
		k.finish(ctx, w, pod, rs)
		return 0
	}
	if err := k.writeStatus(ctx, w, pod, st); err != nil {
		k.logErr(ctx, "pod status", err)
		return retryAfter
	}
	return next
}

// finish stops a pod that ran to completion and reports its terminal
// phase.
func (k *Kubelet) finish(ctx context.Context, w *worker, pod *corev1.Pod, rs *container.PodStatus) {
	k.stopPod(ctx, pod, rs, k.log)
	if rs2, err := k.rt.PodStatus(ctx, string(pod.UID)); err == nil {
		rs = rs2
	}
	k.logErr(ctx, "pod status", k.writeStatus(ctx, w, pod, k.podStatus(pod, rs, w, true)))
}

// ranToCompletion reports whether every app container exited and none is
// to be restarted.
func ranToCompletion(pod *corev1.Pod, rs *container.PodStatus) bool {
	for _, c := range pod.Spec.Containers {
		l := rs.Latest(c.Name)
		if l == nil || l.State != container.StateExited || shouldRestart(pod, l) {
			return false
		}
	}
	return len(pod.Spec.Containers) > 0
}

func shouldRestart(pod *corev1.Pod, c *container.Container) bool {
	switch pod.Spec.RestartPolicy {
	case corev1.RestartPolicyNever:
		return false
	case corev1.RestartPolicyOnFailure:
		return c.ExitCode != 0
	}
	return true
}

// createSandbox reports the pod Pending, prepares its volumes and runs a
// new sandbox (killing the containers of a dead one first). ok is false
// when the round must end here.
func (k *Kubelet) createSandbox(ctx context.Context, w *worker, pod *corev1.Pod, rs *container.PodStatus, log *slog.Logger) (time.Duration, bool) {
	k.killContainers(ctx, pod, rs, minGrace, log)
	// The Pending status goes out while the volumes and the sandbox are
	// set up, as kube's status manager writes apart from the pod's sync;
	// it is done before this returns, so the worker's writes stay one at a
	// time and in order.
	pending := k.podStatus(pod, rs, w, false)
	wrote := make(chan error, 1)
	go func() { wrote <- k.writeStatus(ctx, w, pod, pending) }()
	defer func() { k.logErr(ctx, "pod status", <-wrote) }()
	if !k.info.Simulated {
		if err := k.setupVolumes(ctx, pod); err != nil {
			k.logErr(ctx, "volumes", err)
			return retryAfter * 2, false
		}
	}
	if k.csi != nil {
		if err := k.setupCSIVolumes(ctx, pod); err != nil {
			if !errors.Is(err, errNotAttached) {
				k.logErr(ctx, "volumes", err)
			}
			return retryAfter, false
		}
	}
	var attempt uint32
	if sb := rs.Sandbox(); sb != nil {
		attempt = sb.Attempt + 1
	}
	start := k.now()
	sbCfg, err := k.sandboxConfig(pod, attempt)
	if err != nil {
		k.logErr(ctx, "sandbox config", err)
		k.podEventf(ctx, pod, corev1.EventTypeWarning, ReasonFailedCreateSandbox, "Failed to create pod sandbox config: %v", err)
		return retryAfter * 2, false
	}
	id, err := k.rt.RunSandbox(ctx, sbCfg)
	if err != nil {
		k.logErr(ctx, "run sandbox", err)
		k.podEventf(ctx, pod, corev1.EventTypeWarning, ReasonFailedCreateSandbox, "Failed to create pod sandbox: %v", err)
		return retryAfter * 2, false
	}
	log.Debug("sandbox ready", "id", id, "took", k.now().Sub(start))
	return 0, true
}

// syncContainers runs the init containers in order, then the app
// containers. It returns when to look again (a back-off ending).
func (k *Kubelet) syncContainers(ctx context.Context, w *worker, pod *corev1.Pod, rs *container.PodStatus, log *slog.Logger) time.Duration {
	sb := rs.Sandbox()
	inSandbox := func(name string) *container.Container {
		for _, c := range rs.ContainersNamed(name) {
			if c.SandboxID == sb.ID {
				return c
			}
		}
		return nil
	}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		latest := inSandbox(c.Name)
		switch {
		case latest == nil:
			return k.startContainer(ctx, w, pod, rs, c, nextAttempt(rs, c.Name), log)
		case latest.State == container.StateRunning:
			return 0 // wait for it: the relist kicks when it exits
		case latest.State == container.StateCreated:
			// Left created by a kubelet that died between create and start.
			return k.runContainer(ctx, w, pod, c.Name, latest.ID)
		case latest.State == container.StateExited && latest.ExitCode == 0:
			continue
		case pod.Spec.RestartPolicy == corev1.RestartPolicyNever:
			return 0 // the pod failed
		default:
			return k.restart(ctx, w, pod, rs, c, latest, log)
		}
	}
	var next time.Duration
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		latest := inSandbox(c.Name)
		k.stopDuplicates(ctx, pod, rs, latest, log)
		var d time.Duration
		switch {
		case latest == nil:
			d = k.startContainer(ctx, w, pod, rs, c, nextAttempt(rs, c.Name), log)
		case latest.State == container.StateRunning:
			if kill, probe := k.probes.shouldKill(latest.ID); kill {
				msg := fmt.Sprintf("Container %s failed %s probe, will be restarted", c.Name, strings.ToLower(probe.String()))
				log.Info("killing container", "container", c.Name, "reason", msg)
				k.killContainer(ctx, pod, latest, msg)
				d = 10 * time.Millisecond
			}
		case latest.State == container.StateCreated:
			d = k.runContainer(ctx, w, pod, c.Name, latest.ID)
		case latest.State == container.StateExited && shouldRestart(pod, latest):
			d = k.restart(ctx, w, pod, rs, c, latest, log)
		}
		if d > 0 && (next == 0 || d < next) {
			next = d
		}
	}
	return next
}

// stopDuplicates stops any running instance of a container other than its
// newest: there is never more than one copy of a container running (a
// previous kubelet may have died between starting a new attempt and
// noticing the old one).
func (k *Kubelet) stopDuplicates(ctx context.Context, pod *corev1.Pod, rs *container.PodStatus, latest *container.Container, log *slog.Logger) {
	if latest == nil {
		return
	}
	for _, c := range rs.ContainersNamed(latest.Name) {
		if c.ID != latest.ID && c.State == container.StateRunning {
			log.Warn("stopping a second copy of a container", "container", c.Name, "id", c.ID)
			k.killContainer(ctx, pod, c, "Stopping container "+c.Name)
		}
	}
}

// killContainer stops one container with the pod's grace period, recording
// Killing with msg.
func (k *Kubelet) killContainer(ctx context.Context, pod *corev1.Pod, c *container.Container, msg string) {
	k.containerEventf(ctx, pod, c.Name, corev1.EventTypeNormal, ReasonKilling, "%s", msg)
	grace := 30 * time.Second
	if g := pod.Spec.TerminationGracePeriodSeconds; g != nil {
		grace = time.Duration(*g) * time.Second
	}
	if err := k.rt.StopContainer(ctx, c.ID, max(grace, minGrace)); err != nil && !errors.Is(err, container.ErrNotFound) {
		k.logErr(ctx, "stop container", err)
	}
	k.probes.forget(c.ID)
}

// nextAttempt is one more than the highest attempt of the container, 0 for
// its first run.
func nextAttempt(rs *container.PodStatus, name string) uint32 {
	if l := rs.Latest(name); l != nil {
		return l.Attempt + 1
	}
	return 0
}

// restart starts a new attempt of an exited container unless it is backing
// off (then its status waits with CrashLoopBackOff until the back-off ends).
// The first restart is immediate, then 10s, 20s, 40s ... up to 5 minutes.
func (k *Kubelet) restart(ctx context.Context, w *worker, pod *corev1.Pod, rs *container.PodStatus, c *corev1.Container, latest *container.Container, log *slog.Logger) time.Duration {
	key := string(pod.UID) + "/" + c.Name
	if in, end := k.crashes.inBackOffSince(key, latest.FinishedAt); in {
		k.containerEventf(ctx, pod, c.Name, corev1.EventTypeWarning, ReasonBackOff, "Back-off restarting failed container %s in pod %s_%s(%s)",
			c.Name, pod.Name, pod.Namespace, pod.UID)
		w.setWaiting(c.Name, "CrashLoopBackOff", fmt.Sprintf("back-off %s restarting failed container=%s pod=%s_%s(%s)",
			k.crashes.delay(key), c.Name, pod.Name, pod.Namespace, pod.UID))
		return end.Sub(k.now())
	}
	k.crashes.next(key, latest.FinishedAt)
	// Keep the newest exited instance (kubectl logs --previous), remove older ones.
	for _, old := range rs.ContainersNamed(c.Name) {
		if old.ID != latest.ID && old.State == container.StateExited {
			k.logErr(ctx, "remove old container", k.rt.RemoveContainer(ctx, old.ID))
		}
	}
	return k.startContainer(ctx, w, pod, rs, c, latest.Attempt+1, log)
}
