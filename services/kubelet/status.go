package kubelet

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/cairn-dev/cairn/services/kubelet/container"
)

// podStatus computes the pod's API status from what the runtime holds, as
// the kubelet's generateAPIPodStatus does. terminal is true once the pod
// is being deleted or has finished: its containers will not be restarted,
// so stopped containers make the phase Succeeded or Failed.
func (k *Kubelet) podStatus(pod *corev1.Pod, rs *container.PodStatus, w *worker, terminal bool) corev1.PodStatus {
	old := w.oldStatus(pod)
	now := metav1.NewTime(k.now().Truncate(time.Second))
	st := corev1.PodStatus{
		ObservedGeneration: pod.Generation,
		QOSClass:           old.QOSClass,
		HostIP:             k.nodeIP,
		HostIPs:            []corev1.HostIP{{IP: k.nodeIP}},
		StartTime:          old.StartTime,
		PodIP:              old.PodIP,
		PodIPs:             old.PodIPs,
	}
	if st.StartTime == nil {
		st.StartTime = &now
	}
	sb := rs.Sandbox()
	sandboxReady := sb != nil && sb.State == container.SandboxReady
	if sandboxReady && len(sb.IPs) > 0 {
		st.PodIP = sb.IPs[0]
		st.PodIPs = nil
		for _, ip := range sb.IPs {
			st.PodIPs = append(st.PodIPs, corev1.PodIP{IP: ip})
		}
	}
	var sbID string
	if sb != nil {
		sbID = sb.ID
	}
	initDone := true
	for _, c := range pod.Spec.InitContainers {
		cs := k.containerStatus(pod, &c, rs, w, old.InitContainerStatuses, sbID, true, false)
		st.InitContainerStatuses = append(st.InitContainerStatuses, cs)
		if cs.State.Terminated == nil || cs.State.Terminated.ExitCode != 0 {
			initDone = false
		}
	}
	for _, c := range pod.Spec.Containers {
		cs := k.containerStatus(pod, &c, rs, w, old.ContainerStatuses, sbID, false, len(pod.Spec.InitContainers) > 0 && !initDone)
		st.ContainerStatuses = append(st.ContainerStatuses, cs)
	}
	st.Phase = podPhase(pod, st.InitContainerStatuses, st.ContainerStatuses, terminal)
	if isTerminalPhase(old.Phase) {
		// A pod never leaves a terminal phase.
		st.Phase = old.Phase
	}
	st.Conditions = podConditions(pod, &st, old, sandboxReady, initDone, now)
	return st
}

// containerStatus is one container's status. sbID is the current sandbox:
// init containers count as done only in it. initPending makes a not yet
// created app container wait with PodInitializing.
func (k *Kubelet) containerStatus(pod *corev1.Pod, c *corev1.Container, rs *container.PodStatus, w *worker,
	old []corev1.ContainerStatus, sbID string, isInit, initPending bool) corev1.ContainerStatus {
	cs := corev1.ContainerStatus{Name: c.Name, Image: c.Image, Started: ptr.To(false)}
	waiting, hasWaiting := w.waitingFor(c.Name)
	all := rs.ContainersNamed(c.Name)
	if isInit {
		all = slices.DeleteFunc(all, func(x *container.Container) bool { return x.SandboxID != sbID })
	}
	if len(all) == 0 {
		for _, o := range old {
			if o.Name == c.Name {
				cs.RestartCount = o.RestartCount
			}
		}
		switch {
		case hasWaiting:
			cs.State.Waiting = &waiting
		case isInit || initPending:
			cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: "PodInitializing"}
		default:
			cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}
		}
		return cs
	}
	latest := all[0]
	cs.RestartCount = int32(latest.Attempt)
	cs.ContainerID = k.info.Name + "://" + latest.ID
	cs.ImageID = latest.ImageRef
	switch latest.State {
	case container.StateRunning:
		cs.State.Running = &corev1.ContainerStateRunning{StartedAt: apiTime(latest.StartedAt)}
		started := k.probes.started(latest.ID, c)
		cs.Started = ptr.To(started)
		cs.Ready = started && k.probes.ready(latest.ID, c)
	case container.StateExited:
		term := terminated(k.info.Name, latest)
		if hasWaiting {
			cs.State.Waiting = &waiting
			cs.LastTerminationState.Terminated = term
		} else {
			cs.State.Terminated = term
		}
	default:
		cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}
		if hasWaiting {
			cs.State.Waiting = &waiting
		}
	}
	if cs.LastTerminationState.Terminated == nil && len(all) > 1 && all[1].State == container.StateExited {
		cs.LastTerminationState.Terminated = terminated(k.info.Name, all[1])
	}
	return cs
}

func terminated(runtime string, c *container.Container) *corev1.ContainerStateTerminated {
	reason := c.Reason
	if reason == "" {
		reason = "Error"
		if c.ExitCode == 0 {
			reason = "Completed"
		}
	}
	t := &corev1.ContainerStateTerminated{
		ExitCode: c.ExitCode, Reason: reason, Message: c.Message,
		FinishedAt: apiTime(c.FinishedAt), ContainerID: runtime + "://" + c.ID,
	}
	if !c.StartedAt.IsZero() {
		t.StartedAt = apiTime(c.StartedAt)
	}
	return t
}

// podPhase is kubelet's getPhase.
func podPhase(pod *corev1.Pod, inits, statuses []corev1.ContainerStatus, terminal bool) corev1.PodPhase {
	pendingInit, failedInit := false, false
	for _, cs := range inits {
		switch {
		case cs.State.Running != nil:
			pendingInit = true
		case cs.State.Terminated != nil:
			if cs.State.Terminated.ExitCode != 0 {
				failedInit = true
			}
		case cs.State.Waiting != nil:
			if t := cs.LastTerminationState.Terminated; t != nil && t.ExitCode != 0 {
				failedInit = true
			} else {
				pendingInit = true
			}
		default:
			pendingInit = true
		}
	}
	if failedInit && (pod.Spec.RestartPolicy == corev1.RestartPolicyNever || terminal) {
		return corev1.PodFailed
	}
	var unknown, running, waiting, stopped, succeeded int
	for _, cs := range statuses {
		switch {
		case cs.State.Running != nil:
			running++
		case cs.State.Terminated != nil:
			stopped++
			if cs.State.Terminated.ExitCode == 0 {
				succeeded++
			}
		case cs.State.Waiting != nil:
			if cs.LastTerminationState.Terminated != nil {
				stopped++
			} else {
				waiting++
			}
		default:
			unknown++
		}
	}
	switch {
	case pendingInit || failedInit:
		return corev1.PodPending
	case waiting > 0:
		return corev1.PodPending
	case running > 0 && unknown == 0:
		return corev1.PodRunning
	case running == 0 && stopped > 0 && unknown == 0:
		if terminal {
			if stopped == succeeded {
				return corev1.PodSucceeded
			}
			return corev1.PodFailed
		}
		if pod.Spec.RestartPolicy == corev1.RestartPolicyAlways {
			return corev1.PodRunning
		}
		if stopped == succeeded {
			return corev1.PodSucceeded
		}
		if pod.Spec.RestartPolicy == corev1.RestartPolicyNever {
			return corev1.PodFailed
		}
		return corev1.PodRunning
	}
	return corev1.PodPending
}

func isTerminalPhase(p corev1.PodPhase) bool {
	return p == corev1.PodSucceeded || p == corev1.PodFailed
}

// podConditions are the kubelet's conditions, in the order kubectl
// describe shows them, then any others the pod carries (the scheduler's,
// readiness gates').
func podConditions(pod *corev1.Pod, st *corev1.PodStatus, old corev1.PodStatus, sandboxReady, initDone bool, now metav1.Time) []corev1.PodCondition {
	cond := func(t corev1.PodConditionType, ok bool, reason, msg string) corev1.PodCondition {
		c := corev1.PodCondition{Type: t, Status: corev1.ConditionFalse, Reason: reason, Message: msg, LastTransitionTime: now}
		if ok {
			c.Status, c.Reason, c.Message = corev1.ConditionTrue, "", ""
		}
		c.ObservedGeneration = pod.Generation
		for _, o := range old.Conditions {
			if o.Type == t && o.Status == c.Status {
				c.LastTransitionTime = o.LastTransitionTime
			}
		}
		return c
	}
	var notInit, notReady []string
	for _, cs := range st.InitContainerStatuses {
		if cs.State.Terminated == nil || cs.State.Terminated.ExitCode != 0 {
			notInit = append(notInit, cs.Name)
		}
	}
	for _, cs := range st.ContainerStatuses {
		if !cs.Ready {
			notReady = append(notReady, cs.Name)
		}
	}
	initMsg := fmt.Sprintf("containers with incomplete status: [%s]", strings.Join(notInit, " "))
	readyReason := "ContainersNotReady"
	readyMsg := fmt.Sprintf("containers with unready status: [%s]", strings.Join(notReady, " "))
	if st.Phase == corev1.PodSucceeded {
		readyReason, readyMsg = "PodCompleted", ""
	}
	containersReady := len(notReady) == 0 && !isTerminalPhase(st.Phase)
	ready := cond(corev1.PodReady, containersReady, readyReason, readyMsg)
	if containersReady {
		if gates := unreadyGates(pod, old); len(gates) > 0 {
			ready = cond(corev1.PodReady, false, "ReadinessGatesNotReady",
				fmt.Sprintf("corresponding condition of pod readiness gate %q does not exist.", gates[0]))
		}
	}
	out := []corev1.PodCondition{
		cond(corev1.PodReadyToStartContainers, sandboxReady, "", ""),
		cond(corev1.PodInitialized, initDone, "ContainersNotInitialized", initMsg),
		ready,
		cond(corev1.ContainersReady, containersReady, readyReason, readyMsg),
	}
	scheduled := false
	for _, o := range old.Conditions {
		switch o.Type {
		case corev1.PodReadyToStartContainers, corev1.PodInitialized, corev1.PodReady, corev1.ContainersReady:
			continue
		case corev1.PodScheduled:
			scheduled = true
		}
		out = append(out, o)
	}
	if !scheduled {
		out = append(out, cond(corev1.PodScheduled, true, "", ""))
	}
	return out
}

// unreadyGates are the readiness gates whose condition is not True.
func unreadyGates(pod *corev1.Pod, old corev1.PodStatus) []string {
	var out []string
	for _, g := range pod.Spec.ReadinessGates {
		ok := false
		for _, c := range old.Conditions {
			if c.Type == g.ConditionType && c.Status == corev1.ConditionTrue {
				ok = true
			}
		}
		if !ok {
			out = append(out, string(g.ConditionType))
		}
	}
	return out
}

// apiTime is t as the API stores it (whole seconds), so that a status
// computed again compares equal to the one read back.
func apiTime(t time.Time) metav1.Time {
	return metav1.NewTime(t.Truncate(time.Second))
}
