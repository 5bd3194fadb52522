package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cairn-dev/cairn/events/consumer"
	"github.com/cairn-dev/cairn/schemas/fit"
	fw "github.com/cairn-dev/cairn/services/scheduler/framework"
	"github.com/cairn-dev/cairn/services/scheduler/preemption"
	"github.com/cairn-dev/cairn/services/scheduler/queue"
)

// counters count what the replica did.
type counters struct {
	attempts, scheduled, unschedulable, conflicts, overcommits, preemptions, victims atomic.Int64
	violations, descheduled                                                          atomic.Int64
	cycleNanos, bindNanos                                                            atomic.Int64
}

// Stats are a replica's counters.
type Stats struct {
	// Attempts is the number of scheduling cycles.
	Attempts int64
	// Scheduled counts successful bindings.
	Scheduled int64
	// Unschedulable counts cycles that found no node.
	Unschedulable int64
	// Conflicts counts bindings refused because the pod was bound (by
	// another replica) or deleted meanwhile.
	Conflicts int64
	// Overcommits counts bindings the apiserver refused as overcommitting.
	Overcommits int64
	// Preemptions counts nominations; Victims the pods evicted for them.
	Preemptions, Victims int64
	// Violations counts bindings of this replica found, once confirmed, to
	// break required pod anti-affinity with a pod another scheduler bound
	// just before; Descheduled those of them it evicted (see deschedule.go).
	Violations, Descheduled int64
	// EventsWritten and EventsDropped count Events (see recorder.go).
	EventsWritten, EventsDropped int64
	// CycleTime is the time spent deciding (all attempts); BindTime the
	// time bindings took, request to answer (all bindings, refused ones
	// included).
	CycleTime, BindTime time.Duration
}

// Stats returns the replica's counters.
func (s *Scheduler) Stats() Stats {
	c := &s.stats
	return Stats{Attempts: c.attempts.Load(), Scheduled: c.scheduled.Load(), Unschedulable: c.unschedulable.Load(),
		Conflicts: c.conflicts.Load(), Overcommits: c.overcommits.Load(), Preemptions: c.preemptions.Load(), Victims: c.victims.Load(),
		CycleTime: time.Duration(c.cycleNanos.Load()), BindTime: time.Duration(c.bindNanos.Load()),
		EventsWritten: s.recorder.Written(), EventsDropped: s.recorder.Dropped(),
		Violations: c.violations.Load(), Descheduled: c.descheduled.Load()}
}

// loop schedules one pod at a time until ctx ends, then waits for the
// bindings and writes in flight. Bindings and writes run on Config.Workers
// long-lived goroutines (their stacks grow once, not for every binding).
func (s *Scheduler) loop(ctx context.Context) error {
	var wg sync.WaitGroup
	defer s.unguardAll()
	defer wg.Wait()
	if err := s.WaitForSync(ctx); err != nil {
		return nil //nolint:nilerr // ctx ended before the caches synced: a clean stop
	}
	wg.Go(func() { s.queue.Run(ctx, 100*time.Millisecond) })
	for range s.cfg.Workers {
		wg.Go(func() {
			for {
				select {
				case fn := <-s.work:
					fn()
				case <-ctx.Done():
					return
				}
			}
		})
	}
	for {
		qp, err := s.queue.Pop(ctx)
		if err != nil {
			return nil
		}
		s.scheduleOne(ctx, qp)
	}
}

// async runs fn on a worker once one is free; not if ctx ends first (it
// reports whether fn was handed over).
func (s *Scheduler) async(ctx context.Context, fn func()) bool {
	select {
	case s.work <- fn:
		return true
	case <-ctx.Done():
		return false
	}
}

// scheduleOne makes one decision. Sharded, it holds the pod's partition
// (Guard) from the decision until the binding is refused or on the log
// (guards.go), so that the partition never moves to another replica with a
// binding in flight or not yet readable there (that replica would bind the
// pod a second time).
func (s *Scheduler) scheduleOne(ctx context.Context, qp *queue.QueuedPod) {
	pod, ok := s.pods.Get(qp.Pod.Namespace, qp.Pod.Name)
	if !ok || pod.UID != qp.Pod.UID || !s.responsible(pod) || s.cache.isAssumed(qp.Key) {
		s.queue.Done(qp.Key)
		return
	}
	if !s.guard(qp.Key) {
		s.queue.Done(qp.Key)
		return
	}
	s.stats.attempts.Add(1)
	start := time.Now()
	var res fw.Result
	var err error
	var pr preemption.Result
	s.cache.read(func(snap *fw.Snapshot) {
		res, err = s.fw.Schedule(ctx, qp.PodInfo, snap)
		var fe *fw.FitError
		if errors.As(err, &fe) {
			pr = preemption.Preempt(ctx, s.fw, qp.PodInfo, snap, fe.Diagnosis)
		}
	})
	s.stats.cycleNanos.Add(int64(time.Since(start)))
	var fe *fw.FitError
	switch {
	case errors.As(err, &fe):
		s.unguard(qp.Key)
		s.unschedulable(ctx, qp, pod, fe, pr)
	case errors.Is(err, fw.ErrNoNodes):
		// As kube: unschedulable (not an error), with no nomination.
		s.unguard(qp.Key)
		s.park(ctx, qp, pod, noNodesMessage, "", nil)
	case err != nil:
		s.unguard(qp.Key)
		s.log.Warn("scheduling failed", "pod", qp.Key, "err", err)
		s.queue.AddBackoff(qp)
	default:
		s.cache.assume(qp.PodInfo, res.Node)
		if !s.async(ctx, func() { s.bind(ctx, qp, pod, res.Node) }) {
			s.cache.forget(qp.Key)
			s.unguard(qp.Key)
		}
	}
}

// bind posts the binding, with the cause of the pod's scheduling as its
// causation. A rejected binding un-assumes the pod: a conflict because the
// pod is bound or gone ends its attempt; an overcommit (our view was
// stale: another replica filled the node) waits until the pod cache has
// read the log up to now, then retries the pod at once.
func (s *Scheduler) bind(ctx context.Context, qp *queue.QueuedPod, pod *corev1.Pod, node string) {
	// qp is read only until it goes back to the queue (which may then
	// update it).
	key := qp.Key
	cctx := consumer.WithCause(ctx, s.cause(key))
	if s.beforeBind != nil {
		s.beforeBind(pod)
	}
	if st := s.fw.RunPreBind(cctx, qp.PodInfo, node); !st.IsSuccess() {
		// As kube: the attempt fails, the pod is retried with back-off.
		s.unguard(key)
		s.bindAnswered(key, false)
		s.cache.forget(key)
		if ctx.Err() == nil {
			s.log.Info("prebind failed", "pod", key, "node", node, "plugin", st.Plugin(), "err", st.Message())
		}
		s.queue.AddBackoff(qp)
		return
	}
	start := time.Now()
	err := s.postBinding(cctx, pod, node)
	s.stats.bindNanos.Add(int64(time.Since(start)))
	if err != nil {
		s.unguard(key)
		s.log.Debug("binding refused", "pod", key, "node", node, "err", err)
	}
	s.bindAnswered(key, err == nil)
	switch {
	case err == nil:
		s.stats.scheduled.Add(1)
		s.done(key)
		s.recorder.scheduled(cctx, pod, node)
	case fit.IsOvercommitted(err):
		s.stats.overcommits.Add(1)
		s.cache.forget(key)
		if werr := s.pods.WaitForLog(ctx); werr != nil {
			s.queue.AddBackoff(qp)
			return
		}
		s.queue.Requeue(qp)
	case apierrors.IsConflict(err), apierrors.IsNotFound(err):
		s.stats.conflicts.Add(1)
		s.cache.forget(key)
		s.done(key)
	default:
		if ctx.Err() == nil {
			s.log.Warn("binding failed", "pod", key, "node", node, "err", err)
		}
		s.cache.forget(key)
		s.queue.AddBackoff(qp)
	}
}

// postBinding posts pods/binding as client-go's Pods().Bind does, without
// its per-call reflection over empty CreateOptions and with the small JSON
// body encoded directly.
func (s *Scheduler) postBinding(ctx context.Context, pod *corev1.Pod, node string) error {
	body, err := json.Marshal(&corev1.Binding{TypeMeta: metav1.TypeMeta{Kind: "Binding", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
		Target:     corev1.ObjectReference{Kind: "Node", Name: node}})
	if err != nil {
		return fmt.Errorf("scheduler: encode binding: %w", err)
	}
	return s.client.CoreV1().RESTClient().Post().Namespace(pod.Namespace).Resource("pods").Name(pod.Name).
		SubResource("binding").SetHeader("Content-Type", "application/json").Body(body).Do(ctx).Error()
}

func (s *Scheduler) done(key string) {
	s.queue.Done(key)
	s.mu.Lock()
	delete(s.causes, key)
	s.mu.Unlock()
}

// unschedulable handles a pod that fit nowhere: with a preemption
// candidate it nominates the node and evicts the victims; it records
// PodScheduled=False with kube's message and a FailedScheduling event, and
// parks the pod until the cluster changes.
func (s *Scheduler) unschedulable(ctx context.Context, qp *queue.QueuedPod, pod *corev1.Pod, fe *fw.FitError, pr preemption.Result) {
	nominated := pod.Status.NominatedNodeName
	if c := pr.Candidate; c != nil {
		s.stats.preemptions.Add(1)
		s.stats.victims.Add(int64(len(c.Victims)))
		nominated = c.Node
		s.cache.nominate(qp.PodInfo, c.Node)
	} else {
		fe.Diagnosis.PostFilterMsg = pr.Message
	}
	s.park(ctx, qp, pod, fe.Error(), nominated, pr.Candidate)
}

// noNodesMessage is kube-scheduler's message for an empty cluster.
const noNodesMessage = "no nodes available to schedule pods"

// park parks an unschedulable pod until the cluster changes (a node
// joining, for an empty cluster), then, off the scheduling loop, evicts
// the victims of its preemption candidate c (if any) and records
// PodScheduled=False with msg, the nomination and a FailedScheduling
// event.
func (s *Scheduler) park(ctx context.Context, qp *queue.QueuedPod, pod *corev1.Pod, msg, nominated string, c *preemption.Candidate) {
	s.stats.unschedulable.Add(1)
	cause := s.cause(qp.Key)
	s.queue.AddUnschedulable(qp)
	s.async(ctx, func() {
		cctx := consumer.WithCause(ctx, cause)
		if c != nil {
			s.evict(cctx, pod, c)
		}
		s.recorder.unschedulable(cctx, pod, msg, nominated)
	})
}

// evict deletes the victims gracefully, as kube-scheduler does (with a
// Preempted event on each, naming the preemptor).
func (s *Scheduler) evict(ctx context.Context, preemptor *corev1.Pod, c *preemption.Candidate) {
	for _, v := range c.Victims {
		pre := metav1.Preconditions{UID: &v.Pod.UID}
		err := s.client.CoreV1().Pods(v.Pod.Namespace).Delete(ctx, v.Pod.Name, metav1.DeleteOptions{Preconditions: &pre})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			s.log.Warn("preemption: delete victim", "victim", v.Key, "err", err)
			continue
		}
		s.recorder.preempted(ctx, v.Pod, preemptor, c.Node)
	}
}
