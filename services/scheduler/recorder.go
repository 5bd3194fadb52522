package scheduler

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"

	"github.com/cairn-dev/cairn/events/consumer"
)

// Event reasons, as kube-scheduler's.
const (
	ReasonScheduled        = "Scheduled"
	ReasonFailedScheduling = "FailedScheduling"
	ReasonPreempted        = "Preempted"
	ReasonUnschedulable    = corev1.PodReasonUnschedulable
)

// Event writing follows client-go's record package. An event first goes
// through an EventCorrelator: an event identical to one already written for
// the same object bumps that event's count (a PATCH instead of a new
// object); more than 10 similar ones (same object and reason) within 10
// minutes are combined into one; a per-object spam filter (25, then one
// per 5 minutes) caps the rest. It then waits in a queue for one of
// eventWriters writers (an object's events always go to the same writer,
// so its creates and patches stay in order). The writers share a client
// limited to Config.EventQPS: in a burst of scheduling, events queue and
// are written as fast as that allows, so that they never take more than
// that share of the apiserver and etcd from bindings. Only when
// eventQueue events wait is a new one dropped (Stats.EventsDropped).
const (
	eventWriters = 4
	eventQueue   = 1 << 15
)

// recorder writes core/v1 Events (asynchronously) and pod status updates
// (synchronously, from the caller's worker).
type recorder struct {
	client     kubernetes.Interface // pods/status
	events     kubernetes.Interface // events, rate-limited
	source     corev1.EventSource
	now        func() time.Time
	log        *slog.Logger
	instance   string
	correlator *record.EventCorrelator
	queues     [eventWriters]chan queuedEvent
	written    atomic.Int64
	dropped    atomic.Int64
}

type queuedEvent struct {
	ctx   context.Context
	ev    *corev1.Event
	patch []byte
}

func newRecorder(client, events kubernetes.Interface, component, host string, now func() time.Time, log *slog.Logger) *recorder {
	r := &recorder{client: client, events: events, source: corev1.EventSource{Component: component, Host: host}, now: now, log: log,
		instance: host, correlator: record.NewEventCorrelatorWithOptions(record.CorrelatorOptions{Clock: passiveClock{now}})}
	for i := range r.queues {
		r.queues[i] = make(chan queuedEvent, eventQueue/eventWriters)
	}
	return r
}

// passiveClock adapts the scheduler's clock for the correlator.
type passiveClock struct{ now func() time.Time }

func (c passiveClock) Now() time.Time                  { return c.now() }
func (c passiveClock) Since(t time.Time) time.Duration { return c.now().Sub(t) }

// run writes queued events until ctx ends; the events still queued then
// are not written.
func (r *recorder) run(ctx context.Context) error {
	var wg sync.WaitGroup
	for _, q := range r.queues {
		wg.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case e := <-q:
					r.write(ctx, e)
				}
			}
		})
	}
	wg.Wait()
	return nil
}

// write creates the event, or patches the one it repeats (and creates it if
// that one is gone), as client-go's recordEvent; then tells the correlator
// what the server holds.
func (r *recorder) write(ctx context.Context, e queuedEvent) {
	var out *corev1.Event
	var err error
	events := r.events.CoreV1().Events(e.ev.Namespace)
	if e.patch != nil {
		out, err = events.Patch(e.ctx, e.ev.Name, types.StrategicMergePatchType, e.patch, metav1.PatchOptions{})
	}
	if e.patch == nil || apierrors.IsNotFound(err) {
		e.ev.ResourceVersion = ""
		out, err = events.Create(e.ctx, e.ev, metav1.CreateOptions{})
	}
	if err != nil {
		if ctx.Err() == nil {
			r.log.Debug("event not written", "reason", e.ev.Reason, "object", e.ev.InvolvedObject.Name, "err", err)
		}
		return
	}
	r.written.Add(1)
	r.correlator.UpdateState(out)
}

// event queues an Event about pod; ctx carries its causation.
func (r *recorder) event(ctx context.Context, pod *corev1.Pod, typ, reason, action, msg string) {
	now := r.now()
	t := metav1.NewTime(now)
	ev := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%v.%x", pod.Name, now.UnixNano()), Namespace: pod.Namespace},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: pod.Namespace, Name: pod.Name,
			UID: pod.UID, ResourceVersion: pod.ResourceVersion},
		Reason: reason, Message: msg, Type: typ, Source: r.source, FirstTimestamp: t, LastTimestamp: t, Count: 1,
		EventTime: metav1.NewMicroTime(now), Action: action, ReportingController: r.source.Component, ReportingInstance: r.instance,
	}
	res, err := r.correlator.EventCorrelate(ev)
	if err != nil {
		r.log.Debug("event correlation", "reason", reason, "pod", pod.Name, "err", err)
	}
	if res == nil || res.Skip {
		return
	}
	e := queuedEvent{ctx: context.WithoutCancel(ctx), ev: res.Event}
	if res.Event.Count > 1 {
		e.patch = res.Patch
	}
	select {
	case r.queues[writerOf(pod)] <- e:
	default:
		r.dropped.Add(1)
		r.log.Debug("event dropped: queue full", "reason", reason, "pod", pod.Name)
	}
}

// writerOf spreads objects over the writers.
func writerOf(pod *corev1.Pod) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(pod.Namespace + "/" + pod.Name))
	return int(h.Sum32() % eventWriters)
}

// scheduled records the Scheduled event of a bound pod.
func (r *recorder) scheduled(ctx context.Context, pod *corev1.Pod, node string) {
	r.event(ctx, pod, corev1.EventTypeNormal, ReasonScheduled, "Binding",
		fmt.Sprintf("Successfully assigned %s/%s to %s", pod.Namespace, pod.Name, node))
}

// preempted records, on a victim, who preempted it.
func (r *recorder) preempted(ctx context.Context, victim, by *corev1.Pod, node string) {
	r.event(ctx, victim, corev1.EventTypeNormal, ReasonPreempted, "Preempting",
		fmt.Sprintf("Preempted by pod %s on node %s", by.UID, node))
}

// unschedulable records the FailedScheduling event and sets
// PodScheduled=False (reason Unschedulable, message msg) and
// status.nominatedNodeName through pods/status, skipping the write when
// the pod already says so.
func (r *recorder) unschedulable(ctx context.Context, pod *corev1.Pod, msg, nominated string) {
	r.event(ctx, pod, corev1.EventTypeWarning, ReasonFailedScheduling, "Scheduling", msg)
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == ReasonUnschedulable &&
			c.Message == msg && pod.Status.NominatedNodeName == nominated {
			return
		}
	}
	for try := 0; try < 2 && pod != nil; try++ {
		err := r.patchStatus(ctx, pod, msg, nominated)
		if !apierrors.IsConflict(err) {
			if err != nil && !apierrors.IsNotFound(err) && ctx.Err() == nil {
				r.log.Warn("status not written", "pod", consumer.KeyOf(pod), "err", err)
			}
			return
		}
		// Changed since our copy: only an unbound pod gets the condition.
		pod, err = r.client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil || pod.Spec.NodeName != "" || pod.DeletionTimestamp != nil {
			return
		}
	}
}

// patchStatus patches the condition and nomination with the pod's
// resourceVersion as precondition, so a pod bound meanwhile (by another
// replica) never gets PodScheduled=False.
func (r *recorder) patchStatus(ctx context.Context, pod *corev1.Pod, msg, nominated string) error {
	type status struct {
		Conditions        []corev1.PodCondition `json:"conditions"`
		NominatedNodeName *string               `json:"nominatedNodeName,omitempty"`
	}
	type meta struct {
		ResourceVersion string `json:"resourceVersion"`
	}
	var nom *string
	if nominated != "" || pod.Status.NominatedNodeName != "" {
		nom = &nominated
	}
	patch, err := json.Marshal(map[string]any{"metadata": meta{ResourceVersion: pod.ResourceVersion}, "status": status{
		Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: ReasonUnschedulable,
			Message: msg, LastTransitionTime: metav1.NewTime(r.now().Truncate(time.Second))}},
		NominatedNodeName: nom,
	}})
	if err != nil {
		return fmt.Errorf("scheduler: status patch: %w", err)
	}
	_, err = r.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch,
		metav1.PatchOptions{}, "status")
	return err
}
