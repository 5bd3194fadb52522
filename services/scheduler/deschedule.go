package scheduler

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/events/consumer"
	fw "github.com/cairn-dev/cairn/services/scheduler/framework"
)

// Reasons of the events about a binding that broke required anti-affinity.
const (
	// ReasonDescheduled: the pod was evicted (as sigs.k8s.io/descheduler
	// words it).
	ReasonDescheduled = "Descheduled"
	// ReasonAntiAffinityViolated: the pod, which no controller would
	// recreate, was left in place.
	ReasonAntiAffinityViolated = "AntiAffinityViolated"
)

// violationQueue bounds the violations waiting to be handled.
const violationQueue = 1024

// A binding can break required pod anti-affinity when two schedulers (two
// replicas) place conflicting pods at the same moment, each from a view
// without the other's pod: the apiserver checks only resources. The replica
// that bound a pod checks it when the log confirms the binding: its cache
// then holds every pod bound before it in the log (and its own decisions,
// which are consistent with it), so a conflict found then is with a pod
// bound earlier, by another scheduler, and the pod at fault is this one —
// the later of the two. Exactly one of them is therefore handled, by the
// replica that bound it. As a descheduler would (RemovePodsViolatingInterPodAntiAffinity),
// the replica evicts it if a controller owns it (graceful delete with a
// UID precondition; the controller recreates it and it is scheduled again,
// now seeing the other), or leaves a bare pod in place with a Warning
// event, since nothing would recreate it.
type violation struct {
	pod, with *corev1.Pod
	cause     consumer.Cause
}

// antiAffinityConflict returns a counted pod, other than pi, that shares a
// topology domain with pi (bound, counted on its node) under a required
// anti-affinity term of either of them, or nil.
func antiAffinityConflict(snap *fw.Snapshot, pi *fw.PodInfo) *fw.PodInfo {
	ni := snap.NodeInfo(pi.Pod.Spec.NodeName)
	if ni == nil {
		return nil
	}
	sameDomain := func(key string, other *fw.NodeInfo) bool {
		v, ok := ni.Node.Labels[key]
		w, ok2 := other.Node.Labels[key]
		return ok && ok2 && v == w
	}
	var found *fw.PodInfo
	for i := range pi.RequiredAntiAffinity {
		t := &pi.RequiredAntiAffinity[i]
		snap.EachPodMatching(t, func(other *fw.NodeInfo, ex *fw.PodInfo) {
			if found == nil && ex.Key != pi.Key && sameDomain(t.TopologyKey, other) {
				found = ex
			}
		})
	}
	if found == nil {
		snap.EachAntiAffinityTerm(pi.Pod, func(pt *fw.PlacedTerm) {
			if found == nil && pt.Pod.Key != pi.Key && sameDomain(pt.Term.TopologyKey, pt.Node) {
				found = pt.Pod
			}
		})
	}
	return found
}

// A pod this replica assumed shows up bound on the log either before or
// after the answer to its binding (optimistic replicas bind the same pods:
// the binding on the log may be another replica's). A confirmation pairs
// the two: the conflict is computed when the log shows the binding (the
// cache is then in log order) and acted on only once this replica's own
// binding is known to have succeeded.
type confirmation struct {
	answered, seen bool
	v              *violation
}

// seenBound: the log shows bound a pod this replica assumed; conflict is
// what it breaks, if anything.
func (s *Scheduler) seenBound(pod *corev1.Pod, conflict *fw.PodInfo, ev *events.Event) {
	var v *violation
	if conflict != nil {
		v = &violation{pod: pod, with: conflict.Pod, cause: consumer.CauseOf(ev)}
	}
	key := consumer.KeyOf(pod)
	s.mu.Lock()
	c := s.confirms[key]
	if c == nil {
		c = &confirmation{}
		s.confirms[key] = c
	}
	c.seen, c.v = true, v
	ready := c.answered
	if ready {
		delete(s.confirms, key)
	}
	s.mu.Unlock()
	if ready && v != nil {
		s.violated(*v)
	}
}

// bindAnswered: this replica's binding of key succeeded (ok) or not.
func (s *Scheduler) bindAnswered(key string, ok bool) {
	s.mu.Lock()
	c := s.confirms[key]
	if !ok || (c != nil && c.seen) {
		delete(s.confirms, key)
	} else {
		s.confirms[key] = &confirmation{answered: true}
	}
	s.mu.Unlock()
	if ok && c != nil && c.v != nil {
		s.violated(*c.v)
	}
}

// violated queues the handling of a binding of this replica that breaks
// required anti-affinity with another pod.
func (s *Scheduler) violated(v violation) {
	s.stats.violations.Add(1)
	s.log.Warn("binding broke required pod anti-affinity", "pod", consumer.KeyOf(v.pod), "node", v.pod.Spec.NodeName, "with", consumer.KeyOf(v.with))
	select {
	case s.violations <- v:
	default:
		s.log.Warn("anti-affinity violation not handled: queue full", "pod", consumer.KeyOf(v.pod))
	}
}

// deschedule handles violations until ctx ends.
func (s *Scheduler) deschedule(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case v := <-s.violations:
			s.handleViolation(consumer.WithCause(ctx, v.cause), v)
		}
	}
}

func (s *Scheduler) handleViolation(ctx context.Context, v violation) {
	node, with := v.pod.Spec.NodeName, consumer.KeyOf(v.with)
	if metav1.GetControllerOf(v.pod) == nil {
		s.recorder.event(ctx, v.pod, corev1.EventTypeWarning, ReasonAntiAffinityViolated, "Binding",
			fmt.Sprintf("pod on node %s breaks required pod anti-affinity with pod %s (bound at the same moment by another scheduler); "+
				"not evicted: no controller owns it", node, with))
		return
	}
	pre := metav1.Preconditions{UID: &v.pod.UID}
	err := s.client.CoreV1().Pods(v.pod.Namespace).Delete(ctx, v.pod.Name, metav1.DeleteOptions{Preconditions: &pre})
	switch {
	case err == nil:
		s.stats.descheduled.Add(1)
		s.recorder.event(ctx, v.pod, corev1.EventTypeNormal, ReasonDescheduled, "Descheduling",
			fmt.Sprintf("pod evicted from %s node: it breaks required pod anti-affinity with pod %s, bound at the same moment by another scheduler", node, with))
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		// Gone or replaced meanwhile.
	default:
		if ctx.Err() == nil {
			s.log.Warn("evicting a pod that breaks anti-affinity", "pod", consumer.KeyOf(v.pod), "err", err)
		}
	}
}
