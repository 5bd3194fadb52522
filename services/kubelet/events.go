package kubelet

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cairn-dev/cairn/services/eventrecord"
)

// Component is the source of the kubelet's Events.
const Component = "kubelet"

// Event reasons, as the kubelet's (pkg/kubelet/events).
const (
	ReasonPulling             = "Pulling"
	ReasonPulled              = "Pulled"
	ReasonFailed              = "Failed"
	ReasonBackOff             = "BackOff"
	ReasonErrImageNeverPull   = "ErrImageNeverPull"
	ReasonInspectFailed       = "InspectFailed"
	ReasonCreated             = "Created"
	ReasonStarted             = "Started"
	ReasonKilling             = "Killing"
	ReasonUnhealthy           = "Unhealthy"
	ReasonFailedMount         = "FailedMount"
	ReasonFailedCreateSandbox = "FailedCreatePodSandBox"
	ReasonStarting            = "Starting"
)

var podKind = corev1.SchemeGroupVersion.WithKind("Pod")

// newRecorder is the kubelet's Event recorder, run by its Manager, with a
// client of its own limited to the kubelet's default event rate.
func (k *Kubelet) newRecorder() (*eventrecord.Recorder, error) {
	r, err := eventrecord.ForManager(k.m, eventrecord.Config{Component: Component, Instance: k.cfg.NodeName, Now: k.cfg.Clock, Log: k.log},
		eventrecord.DefaultQPS, eventrecord.DefaultBurst)
	if err != nil {
		return nil, fmt.Errorf("kubelet: %w", err)
	}
	return r, nil
}

// eventf queues an Event about ref. It does nothing without a recorder
// (simulated runtimes). ctx carries the cause.
func (k *Kubelet) eventf(ctx context.Context, ref corev1.ObjectReference, typ, reason, format string, args ...any) {
	if k.events == nil {
		return
	}
	k.events.Eventf(ctx, ref, typ, reason, "", format, args...)
}

// podEventf queues an Event about the pod.
func (k *Kubelet) podEventf(ctx context.Context, pod *corev1.Pod, typ, reason, format string, args ...any) {
	k.eventf(ctx, eventrecord.Ref(pod, podKind), typ, reason, format, args...)
}

// containerEventf queues an Event about the pod's container name: its
// involvedObject.fieldPath names the container, as the kubelet's
// GenerateContainerRef does. Without a recorder it does not build the
// path.
func (k *Kubelet) containerEventf(ctx context.Context, pod *corev1.Pod, name, typ, reason, format string, args ...any) {
	if k.events == nil {
		return
	}
	ref := eventrecord.Ref(pod, podKind)
	ref.FieldPath = containerFieldPath(pod, name)
	k.eventf(ctx, ref, typ, reason, format, args...)
}

// containerFieldPath is the container's path in the pod's spec; app
// containers first, as the kubelet looks.
func containerFieldPath(pod *corev1.Pod, name string) string {
	for _, c := range pod.Spec.Containers {
		if c.Name == name {
			return "spec.containers{" + name + "}"
		}
	}
	for _, c := range pod.Spec.InitContainers {
		if c.Name == name {
			return "spec.initContainers{" + name + "}"
		}
	}
	return "implicitly required container " + name
}

// nodeRef is the reference the kubelet's node Events make: no API version,
// and the node's name as its UID.
func (k *Kubelet) nodeRef() corev1.ObjectReference {
	return corev1.ObjectReference{Kind: "Node", Name: k.cfg.NodeName, UID: types.UID(k.cfg.NodeName)}
}

// nodeConditionEvents records, for every condition whose status differs
// from old (or that old lacks), the kubelet's status event: NodeReady,
// NodeNotReady, NodeHasSufficientMemory, NodeHasNoDiskPressure ...
func (k *Kubelet) nodeConditionEvents(ctx context.Context, old, cur []corev1.NodeCondition) {
	if k.events == nil {
		return
	}
	for _, c := range cur {
		if i := indexCondition(old, c.Type); i >= 0 && old[i].Status == c.Status {
			continue
		}
		if e := nodeConditionEvent(c); e != "" {
			k.eventf(ctx, k.nodeRef(), corev1.EventTypeNormal, e, "Node %s status is now: %s", k.cfg.NodeName, e)
		}
	}
}

func indexCondition(cs []corev1.NodeCondition, t corev1.NodeConditionType) int {
	for i, c := range cs {
		if c.Type == t {
			return i
		}
	}
	return -1
}

// nodeConditionEvent is the kubelet's event for a node condition's status.
func nodeConditionEvent(c corev1.NodeCondition) string {
	isTrue := c.Status == corev1.ConditionTrue
	pick := func(ifTrue, ifFalse string) string {
		if isTrue {
			return ifTrue
		}
		if c.Status == corev1.ConditionFalse {
			return ifFalse
		}
		return ""
	}
	switch c.Type {
	case corev1.NodeReady:
		if isTrue {
			return "NodeReady"
		}
		return "NodeNotReady"
	case corev1.NodeMemoryPressure:
		return pick("NodeHasInsufficientMemory", "NodeHasSufficientMemory")
	case corev1.NodeDiskPressure:
		return pick("NodeHasDiskPressure", "NodeHasNoDiskPressure")
	case corev1.NodePIDPressure:
		return pick("NodeHasInsufficientPID", "NodeHasSufficientPID")
	}
	return ""
}

// pulledMessage is the Pulled event's message after a pull, as the
// kubelet's image manager writes it.
func pulledMessage(image string, pull, total time.Duration, size uint64) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Successfully pulled image %q in %v (%v including waiting).", image, pull.Truncate(time.Millisecond), total.Truncate(time.Millisecond))
	if size > 0 {
		fmt.Fprintf(&b, " Image size: %d bytes.", size)
	}
	return b.String()
}
